/**
 * Option validation, in one place: the checks every option of the core and the adapters goes through,
 * the allowed values, the hints for the option names other rate limiters use, and one message style,
 * `ConfigError`'s: `<option> must be <expected>, received <value>`. An adapter registers its own options
 * as an {@link OptionSchema} with the shared HTTP layer, which checks them here, so the same mistake
 * gets the same message from `new RateLimiter()`, Express, Fastify and Hono.
 * @module
 */
import { ConfigError } from './errors'

/** The failure policies (`onStoreError`). */
export const STORE_ERROR_POLICIES = ['allow', 'deny', 'local'] as const

/**
 * Option names of the libraries users come from (express-rate-limit, @fastify/rate-limit,
 * hono-rate-limiter, rate-limiter-flexible, @upstash/ratelimit), and what Tollgate calls them. Only
 * consulted for a name the owner does not know, so a name one adapter accepts (`hook`, `global`) is
 * never listed here.
 */
export const PEER_OPTION_HINTS: Readonly<Record<string, string>> = {
  windowMs: "window, a number of ms or a string such as '15m'",
  timeWindow: "window, a number of ms or a string such as '15m'",
  duration: "window, a number of ms or a string such as '15m'; not seconds",
  max: 'limit',
  points: 'limit',
  tokens: 'limit',
  capacity: 'burst',
  keyGenerator: 'key, a function of the request',
  keyPrefix: 'prefix',
  nameSpace: 'prefix',
  storeClient: 'store, new RedisStore(client)',
  redis: 'store, new RedisStore(client)',
  standardHeaders: "headers, 'ietf', 'draft-7', 'draft-6' or false",
  enableDraftSpec: "headers, 'ietf', 'draft-7', 'draft-6' or false",
  addHeaders: "headers ('ietf', 'draft-7', 'draft-6' or false) and legacyHeaders",
  addHeadersOnExceeding: "headers ('ietf', 'draft-7', 'draft-6' or false) and legacyHeaders",
  handler: 'onLimited',
  message: 'onLimited',
  statusCode: 'onLimited',
  errorResponseBuilder: 'onLimited',
  onLimitReached: 'onLimited',
  allowList: 'skip, a function: true for requests not to limit',
  skipFailedRequest: 'skipFailedRequests',
  skipFailed: 'skipFailedRequests',
  skipSuccessfulRequest: 'skipSuccessfulRequests',
  skipSuccessful: 'skipSuccessfulRequests',
  requestWasSuccessful: 'skipFailedRequests or skipSuccessfulRequests (decided by the status code)',
  passOnStoreError: "onStoreError, 'allow', 'deny' or 'local'",
  insuranceLimiter: "onStoreError: 'local'",
  skipOnError: "onStoreError: 'allow'",
}

/**
 * Checks one option's value (never called for `undefined`, which means the default); throws
 * `ConfigError` naming `option`.
 * @example
 * const positive: OptionCheck = (value, option) => check.positiveInt(value, option)
 */
export type OptionCheck = (value: unknown, option: string) => void

/**
 * An owner's options: name to check. Adapters register theirs with the HTTP layer this way.
 * @example
 * const schema: OptionSchema = { onLimited: check.fn, hook: check.oneOf(['onRequest', 'preHandler']) }
 */
export type OptionSchema = Readonly<Record<string, OptionCheck>>

/** Quotes an allowed value for a message: strings in single quotes, the rest as written. */
function literal(value: unknown): string {
  return typeof value === 'string' ? `'${value}'` : String(value)
}

/**
 * The `expected` part of a message for a value that must be one of `allowed`.
 * @example
 * oneOf(STORE_ERROR_POLICIES) // "one of 'allow', 'deny', 'local'"
 */
export function oneOf(allowed: readonly unknown[]): string {
  return `one of ${allowed.map(literal).join(', ')}`
}

/**
 * The checks. Each takes the value and the option's name (its path, for nested options:
 * `policies.ip.window`) and throws `ConfigError` with one wording per kind of mistake.
 * @example
 * check.fn(options.key, 'key') // ConfigError: key must be a function, received 42
 */
export const check = {
  /** Accepts anything (an option validated by its own owner, e.g. inline limiter options). */
  any(): void {},
  fn(value: unknown, option: string): void {
    if (value !== undefined && typeof value !== 'function')
      throw new ConfigError(option, 'a function', value, 'type')
  },
  bool(value: unknown, option: string): void {
    if (value !== undefined && typeof value !== 'boolean')
      throw new ConfigError(option, 'true or false', value, 'type')
  },
  object(value: unknown, option: string): void {
    if (typeof value !== 'object' || value === null) throw new ConfigError(option, 'an object', value, 'type')
  },
  /** A positive safe integer, at most `max`. */
  positiveInt(value: unknown, option: string, max = Number.MAX_SAFE_INTEGER): void {
    if (typeof value !== 'number') throw new ConfigError(option, 'a positive integer', value, 'type')
    if (!Number.isSafeInteger(value) || value < 1 || value > max) {
      throw new ConfigError(
        option,
        max === Number.MAX_SAFE_INTEGER ? 'a positive integer' : `a positive integer no larger than ${max}`,
        value,
      )
    }
  },
  /** A whole number, 0 or more (a count of proxy hops). */
  count(value: unknown, option: string): void {
    if (typeof value !== 'number') throw new ConfigError(option, 'an integer, 0 or more', value, 'type')
    if (!Number.isSafeInteger(value) || value < 0)
      throw new ConfigError(option, 'an integer, 0 or more', value)
  },
  /** A positive number of milliseconds (`Infinity` only when `infinite`). */
  positiveMs(value: unknown, option: string, infinite = false): void {
    if (typeof value !== 'number') {
      throw new ConfigError(option, 'a positive number of milliseconds', value, 'type')
    }
    if (!(value > 0) || (!infinite && value === Number.POSITIVE_INFINITY)) {
      const expected = infinite
        ? 'a positive number of milliseconds (Infinity allowed)'
        : 'a positive number of milliseconds'
      throw new ConfigError(option, expected, value)
    }
  },
  /**
   * An object of sub-options, each checked by `schema` (names reported as `option.name`).
   * @example
   * check.nested({ failures: check.positiveInt })({ failures: 0 }, 'breaker')
   * // ConfigError: breaker.failures must be a positive integer, received 0
   */
  nested(schema: OptionSchema): OptionCheck {
    return (value, option) => {
      checkOptions(value, schema, option, `${option}.`)
    }
  },
  /**
   * One of a list of values. The message lists them all.
   * @example
   * check.oneOf(STORE_ERROR_POLICIES)('fail', 'onStoreError')
   * // ConfigError: onStoreError must be one of 'allow', 'deny', 'local', received "fail"
   */
  oneOf(allowed: readonly unknown[]): OptionCheck {
    const expected = oneOf(allowed)
    return (value, option) => {
      if (value !== undefined && !allowed.includes(value)) throw new ConfigError(option, expected, value)
    }
  },
}

/**
 * Throws for the first option name `known` lacks. The message gives Tollgate's name for a name from
 * {@link PEER_OPTION_HINTS}, else the known name it is one slip away from, else the known names.
 *
 * @param path prefix of nested names (`'policies.ip.'`), `''` at the top.
 * @example
 * rejectUnknown({ windowMs: 60000 }, new Set(['limit', 'window']), '')
 * // ConfigError: windowMs must be a known option (did you mean window, a number of ms or a string such
 * // as '15m'?), received 60000
 */
export function rejectUnknown(options: object, known: ReadonlySet<string>, path: string): void {
  for (const name of Object.keys(options)) {
    if (known.has(name)) continue
    const value = (options as Record<string, unknown>)[name]
    throw new ConfigError(
      `${path}${name}`,
      knownOption(name, known, PEER_OPTION_HINTS, String),
      value,
      'type',
    )
  }
}

/**
 * What an unknown option name should have been, as the `expected` part of a message: `hints`' text for
 * a name there, else the known name it is one slip (a case change or one edit) away from, shown by
 * `show`, else the list of known names (`none` when there is none).
 *
 * @example
 * knownOption('cots', new Set(['cost', 'limits']), {}, (n) => `'${n}'`) // "a known option (did you mean 'cost'?)"
 */
export function knownOption(
  name: string,
  known: ReadonlySet<string>,
  hints: Readonly<Record<string, string>>,
  show: (name: string) => string,
  none = 'none are accepted',
): string {
  const hint = Object.hasOwn(hints, name) ? hints[name] : undefined
  if (hint !== undefined) return `a known option (did you mean ${hint}?)`
  const near = nearest(name, known)
  if (near !== undefined) return `a known option (did you mean ${show(near)}?)`
  return known.size === 0 ? `a known option (${none})` : `a known option (${[...known].map(show).join(', ')})`
}

/**
 * Validates an options object against a schema: an object, only known names, each value through its
 * check. Returns it typed as a record.
 *
 * @param label what to call the whole object when it is not one (`'options'`, `'config.rateLimit'`).
 * @example
 * checkOptions({ hook: 'onSend' }, { hook: check.oneOf(['onRequest']) })
 * // ConfigError: hook must be one of 'onRequest', received "onSend"
 */
export function checkOptions(
  options: unknown,
  schema: OptionSchema,
  label = 'options',
  path = '',
): Record<string, unknown> {
  check.object(options, label)
  const o = options as Record<string, unknown>
  rejectUnknown(o, new Set(Object.keys(schema)), path)
  for (const [name, validate] of Object.entries(schema)) {
    const value = o[name]
    if (value !== undefined) validate(value, `${path}${name}`)
  }
  return o
}

/** The known name `name` is a case change or one edit (a swap included) away from, if any. */
function nearest(name: string, known: ReadonlySet<string>): string | undefined {
  if (name.length > 64) return undefined // no option name is that long; no point lowering it all
  const lower = name.toLowerCase()
  for (const k of known) if (k.toLowerCase() === lower || oneEdit(lower, k.toLowerCase())) return k
  return undefined
}

/** Whether one insertion, deletion, substitution or swap of two neighbours turns `a` into `b`. */
function oneEdit(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1 || a === b) return false
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  if (a.length === b.length) {
    const swapped = a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2)
    return swapped || a.slice(i + 1) === b.slice(i + 1)
  }
  return a.length > b.length ? a.slice(i + 1) === b.slice(i) : a.slice(i) === b.slice(i + 1)
}
