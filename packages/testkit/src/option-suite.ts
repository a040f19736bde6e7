/**
 * One table of option mistakes, run against `new RateLimiter()` and every adapter: the same mistake must
 * get the same `ConfigError` message, word for word, wherever it is made (options.ts owns the wording).
 *
 * ```ts
 * describeOptionMistakes('express', 'http', (options) => rateLimit(options as never))
 * ```
 *
 * `build` gets complete options (a limiter, or a store with inline limits, plus the mistake) and must
 * throw or reject with the owner's `ConfigError`. Nothing touches Redis: options fail before any call.
 * @module
 */
import { ConfigError, MemoryStore, RateLimiter } from '@tollgate/core'

/** One mistake and the message every owner must give for it. */
export interface OptionMistake {
  readonly name: string
  /** The bad part, spread over the owner's valid base options. */
  readonly options: Readonly<Record<string, unknown>>
  readonly message: string
  /** `'all'`: the core and the adapters; `'http'`: an adapter option, adapters only. */
  readonly owners: 'all' | 'http'
  /** Adapters get inline limiter options (`store`, `limit`, `window`) instead of `limiter`. */
  readonly inline?: boolean
}

const HINT_WINDOW = "window, a number of ms or a string such as '15m'"
const known = (name: string, hint: string, value: unknown, shown: string): OptionMistake => ({
  name: `unknown ${name}`,
  options: { [name]: value },
  message: `${name} must be a known option (did you mean ${hint}?), received ${shown}`,
  owners: 'all',
})

/** The table. Each message is spelled out: a change of wording must be made here, on purpose. */
export const OPTION_MISTAKES: readonly OptionMistake[] = [
  // Names carried over from express-rate-limit, @fastify/rate-limit, hono-rate-limiter, rate-limiter-flexible.
  known('windowMs', HINT_WINDOW, 60_000, '60000'),
  known('timeWindow', HINT_WINDOW, 60_000, '60000'),
  known('max', 'limit', 5, '5'),
  known('points', 'limit', 5, '5'),
  known('keyGenerator', 'key, a function of the request', () => 'k', 'a function'),
  known('standardHeaders', "headers, 'ietf', 'draft-7', 'draft-6' or false", 'draft-7', '"draft-7"'),
  known('skipFailedRequest', 'skipFailedRequests', true, 'true'),
  known('skipSuccessfulRequest', 'skipSuccessfulRequests', true, 'true'),
  known('keyPrefix', 'prefix', 'rl', '"rl"'),
  known('handler', 'onLimited', () => undefined, 'a function'),
  // A slip of one letter or of case gets the known name.
  known('limt', 'limit', 5, '5'),
  known('OnStoreError', 'onStoreError', 'deny', '"deny"'),
  // Function-valued options.
  {
    name: 'onEvent not a function',
    options: { onEvent: 42 },
    message: 'onEvent must be a function, received 42',
    owners: 'all',
  },
  {
    name: 'key not a function',
    options: { key: 42 },
    message: 'key must be a function, received 42',
    owners: 'http',
  },
  {
    name: 'skip not a function',
    options: { skip: 'no' },
    message: 'skip must be a function, received "no"',
    owners: 'http',
  },
  {
    name: 'onLimited not a function',
    options: { onLimited: 42 },
    message: 'onLimited must be a function, received 42',
    owners: 'http',
  },
  {
    name: 'cost neither a count nor a function',
    options: { cost: -1 },
    message:
      'cost must be a non-negative integer, a record of policy name to one, or a function of the request, received -1',
    owners: 'http',
  },
  {
    name: 'limiter neither a RateLimiter nor a function',
    options: { limiter: 'api' },
    message: 'limiter must be a RateLimiter or a function returning one, received "api"',
    owners: 'http',
  },
  // Allowed values.
  {
    name: 'onStoreError not a policy',
    options: { onStoreError: 'open' },
    message: `onStoreError must be one of 'allow', 'deny', 'local', received "open"`,
    owners: 'all',
  },
  {
    name: 'algorithm unknown',
    options: { algorithm: 'leaky' },
    message: `algorithm must be one of 'fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra', received "leaky"`,
    owners: 'all',
    inline: true,
  },
  {
    name: 'headers not a format',
    options: { headers: 'ietf-9' },
    message: `headers must be one of 'ietf', 'draft-7', 'draft-6', false, received "ietf-9"`,
    owners: 'http',
  },
  // Other types.
  {
    name: 'shadow not a boolean',
    options: { shadow: 'yes' },
    message: 'shadow must be true or false, received "yes"',
    owners: 'all',
  },
  {
    name: 'legacyHeaders not a boolean',
    options: { legacyHeaders: 1 },
    message: 'legacyHeaders must be true or false, received 1',
    owners: 'http',
  },
  {
    name: 'timeoutMs not positive',
    options: { timeoutMs: 0 },
    message: 'timeoutMs must be a positive number of milliseconds, received 0',
    owners: 'all',
  },
  {
    name: 'limit not positive',
    options: { limit: 0 },
    message: 'limit must be a positive integer no larger than 67108863, received 0',
    owners: 'all',
    inline: true,
  },
  {
    name: 'options not an object',
    options: undefined as never,
    message: 'options must be an object, received "fast"',
    owners: 'all',
  },
]

/**
 * Runs the table against one owner. `kind` `'core'` builds `new RateLimiter()` options; `'http'` adapter
 * options. `prefix` is what the owner puts before the message (a Fastify route: `GET /x: config.rateLimit.`).
 */
export function describeOptionMistakes(
  owner: string,
  kind: 'core' | 'http',
  build: (options: unknown) => unknown,
  prefix = '',
): void {
  const store = new MemoryStore()
  const limiter = new RateLimiter({ store, limit: 1, window: '1m' })
  const rows = OPTION_MISTAKES.filter((row) => kind === 'http' || row.owners === 'all')
  describe(`${owner}: the same message for the same option mistake`, () => {
    it.each(rows.map((row) => [row.name, row] as const))('%s', async (_name, row) => {
      const options =
        row.name === 'options not an object'
          ? 'fast'
          : kind === 'core' || row.inline
            ? { store, limit: 1, window: '1m', ...row.options }
            : { limiter, ...row.options }
      let error: unknown
      try {
        await build(options)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      const expected =
        prefix !== '' && row.name === 'options not an object'
          ? `${prefix.replace(/\.$/, '')} must be an object, received "fast"`
          : `${prefix}${row.message}`
      expect((error as Error).message).toBe(expected)
    })
  })
}

/**
 * A `build` for {@link describeOptionMistakes} that adds the adapter's own required options (Hono's
 * `getConnInfo`, fetch's `ip`) under every options object, so only the table's mistake is wrong.
 */
export function withRequired(
  required: Record<string, unknown>,
  build: (options: never) => unknown,
): (options: unknown) => unknown {
  return (options) =>
    build((typeof options === 'object' && options !== null ? { ...required, ...options } : options) as never)
}
