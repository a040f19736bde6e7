/**
 * The options every adapter shares, with their checks (each adapter registers its own next to them).
 * @module
 */
import {
  ConfigError,
  type KeyInput,
  RateLimiter,
  type RateLimiterOptions,
  type StoreErrorPolicy,
} from '@tollgate/core'
import {
  type CallCost,
  type CallLimits,
  check,
  checkOptions,
  LIMITER_OPTIONS,
  type OptionSchema,
  STORE_ERROR_POLICIES,
} from '@tollgate/core/internal'
import { HEADER_FORMATS, type HeaderFormat } from './headers'
import { resolveIpv6Subnet } from './ip'
import type { MaybePromise } from './maybe-promise'

/** Options every adapter accepts (each adds its own `onLimited` and framework facts). */
export interface HttpLimiterOptions<Req, Res = unknown> extends Partial<Omit<RateLimiterOptions, 'store'>> {
  /**
   * The limiter, or a function of the request that picks one of several pre-built limiters (tiers:
   * free / pro plans), with no extra round trip. Or omit it and pass the limiter options inline with `store`.
   */
  limiter?: RateLimiter | ((req: Req) => RateLimiter)
  /** Inline limiter: the store (with `limit`/`window` or `policies`). */
  store?: RateLimiterOptions['store']
  /**
   * The identity: a string for every policy, or a record of policy name to key. `info.ip()` gives the
   * canonical client IP (IPv4-mapped folded, IPv6 masked to `ipv6Subnet`): use it rather than the raw
   * address, or an IPv6 client can rotate addresses inside its /64 to escape a per-IP policy.
   * A function that returns a promise is bounded by the limiter's `timeoutMs` (with `cost`): past it the
   * request gets the failure policy, as if the store were down.
   * @default the canonical client IP (plus the route template when mounted on a route, whatever the method)
   * @example
   * key: (req, { ip }) => ({ ip: ip(), account: `email:${req.body.email}` })
   */
  key?: (req: Req, info: KeyInfo) => MaybePromise<KeyInput>
  /**
   * A shared budget: every route (in any adapter, any limiter instance on the same prefix) whose
   * middleware names the same group spends from one budget per client IP. It replaces the route template
   * in the default key (`<ip> group:<name>`), so no `key` function is needed; with a `key` function the
   * function decides the whole key, so the two are not accepted together. Printable ASCII without
   * spaces, 1 to 64 characters.
   * @default none: route-level middleware keys on the route template
   * @example
   * app.get('/search', rateLimit({ limiter: api, group: 'search' }), search)
   * app.get('/suggest', rateLimit({ limiter: api, group: 'search' }), suggest) // the same budget
   */
  group?: string
  /**
   * Per-request limits (plans, tenants): a function of the request returning one limit (a single-policy
   * limiter) or limits by policy name, e.g. read from the API key's record; bounded like `key` when async.
   * Sent with the request's one script call (no limiter per plan). A value the limiter would not accept as
   * its `limit` (or `undefined`) is answered 400 with the reason, before Redis: never admitted, never
   * replaced by another limit. See docs/adapters/*.md#per-request-limits.
   * @default the limiter's own limits
   * @example
   * limits: async (req) => (await plans.of(req.get('x-api-key'))).perMinute
   */
  limits?: (req: Req) => MaybePromise<CallLimits>
  /**
   * Units a request spends: a number, costs by policy name (policies not named cost 1), or a function of
   * the request returning either (bounded like `key`). A bad value is answered 400, before Redis.
   * @default 1
   * @example
   * cost: (req) => ({ tokens: estimateTokens(req.body) }) // requests 1, tokens the estimate
   */
  cost?: CallCost | ((req: Req) => MaybePromise<CallCost>)
  /** Requests for which this returns true are not limited at all (no headers). */
  skip?: (req: Req) => MaybePromise<boolean>
  /** Which RateLimit header syntax to send. @default 'ietf' */
  headers?: HeaderFormat
  /** Also send `X-RateLimit-Limit/-Remaining/-Reset` (reset in epoch seconds). @default false */
  legacyHeaders?: boolean
  /** Refund requests that end with status >= 400 (inside the window they were spent in). @default false */
  skipFailedRequests?: boolean
  /** Refund requests that end with status < 400. @default false */
  skipSuccessfulRequests?: boolean
  /**
   * Whether a finished request succeeded, for `skipFailedRequests` / `skipSuccessfulRequests` (which
   * need one of them; express-rate-limit's option of the same name). It gets the adapter's request and
   * response (Express `req, res`; Fastify `request, reply`; Hono `c, c.res`) once the response is sent.
   * A predicate that throws, rejects or answers anything but a boolean counts the request (no refund):
   * it can never hand out free requests. A handler that throws is a failed request without asking.
   * @default status < 400
   * @example
   * // a 404 is not the client's fault on this route, a 200 with { ok: false } is
   * requestWasSuccessful: (req, res) => res.statusCode < 400 && res.locals.ok !== false
   */
  requestWasSuccessful?: (req: Req, res: Res) => MaybePromise<boolean>
  /**
   * Charge what a request really cost, known once the response is done (LLM tokens, query cost, bytes):
   * the admission spent `cost` (an estimate), and `limiter.settle()` makes the spend the true cost when
   * the response ends, charging the difference or giving it back (past the limit if need be: the
   * identity is then refused until the overdraft drains). Either the name of a response header holding
   * the cost (read from the response's headers once it has ended, e.g. `x-tokens-used`), or a function
   * of the adapter's request and response (as `requestWasSuccessful` gets them) returning it. The
   * function is called when the response has been sent, a streamed one once its stream ended, and, if
   * the client disconnects first, at that moment: it then returns what was spent so far (what was
   * sent). A missing or bad value (not a non-negative integer), or a function that throws or rejects,
   * keeps the admission's spend. The function may return costs by policy name: the policies it names
   * settle, the others keep what they were charged (`{ tokens: usage.total_tokens }` settles the tokens
   * policy and leaves requests at 1). A request refunded by `skipFailedRequests` /
   * `skipSuccessfulRequests` is not settled. The next response's RateLimit headers reflect the
   * settlement once it has landed.
   * @default none: a request spends `cost`
   * @example
   * settle: { header: 'x-tokens-used' }
   * settle: (req, res) => res.locals.usage?.total_tokens
   * settle: (req, res) => ({ tokens: res.locals.usage?.total_tokens })
   */
  settle?: { header: string } | ((req: Req, res: Res) => MaybePromise<CallCost | undefined>)
  /**
   * Decide, count and send headers, but never refuse: the limiter's shadow mode for this route's calls
   * (`decision.shadow` lists the policies that would have refused; metrics count `shadow_refused`).
   * @default false
   */
  shadow?: boolean
  /** Prefix length IPv6 clients are grouped by (32-64, or false for whole addresses). @default 56 */
  ipv6Subnet?: number | false
  /** What to do when the store fails, for this route (overrides the limiter's). */
  onStoreError?: StoreErrorPolicy
}

/** What a `key` function gets besides the request. */
export interface KeyInfo {
  /** The canonical client IP; throws (answered 400) when the address is missing or unparseable. */
  ip(): string
}

// Inline limiter options (with `store`), checked as the limiter checks them. `onStoreError` and `shadow`
// are HTTP options too (per-route overrides, passed on each call), so they may go with `limiter`.
const { onStoreError: _onStoreError, shadow: _shadow, ...INLINE_OPTIONS } = LIMITER_OPTIONS
/** The inline limiter option names. */
export const LIMITER_OPTION_NAMES: readonly string[] = Object.keys(INLINE_OPTIONS)
/** The policy options: a route that sets any of them gets a limiter of its own. */
export const RATE = ['limit', 'window', 'algorithm', 'burst'] as const
export const LEASE = ['concurrency', 'lease'] as const
export const LIMITS = [...RATE, ...LEASE, 'policies'] as const

/** A `group` name: printable ASCII without spaces, 1 to 64 characters. */
const GROUP = /^[\x21-\x7e]{1,64}$/
/** An HTTP field name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** The options every adapter shares, with their checks. An adapter adds its own with `adapterOptions`. */
const HTTP_OPTIONS: OptionSchema = {
  limiter(value, option) {
    // instanceof recognises a limiter of either build (ESM, CommonJS) or copy of the package
    if (!(value instanceof RateLimiter) && typeof value !== 'function')
      throw new ConfigError(option, 'a RateLimiter or a function returning one', value, 'type')
  },
  ...INLINE_OPTIONS,
  key: check.fn,
  group(value, option) {
    if (typeof value !== 'string' || !GROUP.test(value))
      throw new ConfigError(option, 'printable ASCII without spaces, 1 to 64 characters', value)
  },
  limits: check.fn,
  cost(value, option) {
    if (typeof value === 'function' || isCount(value)) return
    const ok =
      typeof value === 'object' &&
      value !== null &&
      !Array.isArray(value) &&
      Object.values(value).every((v) => v === undefined || isCount(v))
    if (!ok)
      throw new ConfigError(
        option,
        'a non-negative integer, a record of policy name to one, or a function of the request',
        value,
      )
  },
  skip: check.fn,
  headers: check.oneOf(HEADER_FORMATS),
  legacyHeaders: check.bool,
  skipFailedRequests: check.bool,
  skipSuccessfulRequests: check.bool,
  requestWasSuccessful: check.fn,
  settle(value, option) {
    if (typeof value === 'function') return
    const header = (value as { header?: unknown } | null)?.header
    if (typeof header !== 'string' || !HEADER_NAME.test(header))
      throw new ConfigError(option, "{ header: '<response header name>' } or a function (req, res)", value)
  },
  shadow: check.bool,
  ipv6Subnet(value, option) {
    try {
      resolveIpv6Subnet(value)
    } catch {
      throw new ConfigError(option, 'an integer from 32 to 64 (up to 128), or false', value)
    }
  },
  onStoreError: check.oneOf(STORE_ERROR_POLICIES),
}

/**
 * Checks adapter options without building anything: the shared options, the adapter's own, and that
 * inline limiter options do not come with `limiter`. Returns them as a record.
 *
 * @param label what to call the whole object when it is not one (`'config.rateLimit'`).
 *
 * @example
 * checkHttpOptions({ limiter, onLimited: 42 }, { onLimited: check.fn })
 * // ConfigError: onLimited must be a function, received 42
 */
export function checkHttpOptions(
  options: unknown,
  adapterOptions: OptionSchema = {},
  label = 'options',
): Record<string, unknown> {
  const o = checkOptions(options, { ...HTTP_OPTIONS, ...adapterOptions }, label)
  if (o.limiter !== undefined) {
    const inline = LIMITER_OPTION_NAMES.find((name) => o[name] !== undefined)
    if (inline !== undefined)
      throw new ConfigError(inline, 'omitted when limiter is given', o[inline], 'type')
  }
  return o
}

/** Whether a value is a cost: a non-negative safe integer. */
export function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0
}
