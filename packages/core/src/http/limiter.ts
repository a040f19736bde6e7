/**
 * Framework-neutral HTTP handling shared by the adapters: the shared options (checked by options.ts, with
 * each adapter's own), route options over app-wide ones, the default key (canonical
 * client IP, plus the route template on a route), the call to the limiter, the response headers,
 * the 429 / 503 problem bodies, shadow mode and window-bound refunds once the response status is known.
 * An adapter only maps its request and reply onto this.
 * @module
 */
import { ConfigError, InputError, RateLimitError, StoreTimeoutError } from '../errors'
import { LIMITER_OPTIONS, RateLimiter, type RateLimiterOptions } from '../limiter'
import type { CallLimits } from '../limits'
import { check, checkOptions, HEADER_FORMATS, type OptionSchema, STORE_ERROR_POLICIES } from '../options'
import { inKeyScope, KEY_SCOPE } from '../registry'
import type { CallCost, Decision, KeyInput, StoreErrorPolicy } from '../types'
import {
  type HeaderFormat,
  type ProblemDetails,
  problemDetails,
  type RateLimitHeaderOptions,
  rateLimitHeaders,
  unavailableProblem,
} from './headers'
import { canonicalIp, resolveIpv6Subnet } from './ip'

type MaybePromise<T> = T | Promise<T>

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

/**
 * What an adapter knows about a request without a framework object. `ip` is read only when the default
 * key or a `key` function's `info.ip()` needs it, so an adapter may make it a getter (Hono, Express):
 * a `key` function that never asks for the address does not pay for it.
 */
export interface RequestFacts {
  /** The client address as the framework resolved it (through its own trust-proxy setting). */
  readonly ip: string | undefined
  /**
   * Not used: the method never enters the key, since a client chooses it freely (a route mounted for
   * every method would otherwise give each method a budget of its own).
   * @deprecated kept so older adapters still type-check
   */
  readonly method?: string
  /** The matched route template (`/users/:id`) when the middleware is mounted on a route. */
  readonly route?: string
}

/** What the adapter must do with a request. */
export interface HttpResult {
  /** 200 = let the request through; 429 refused; 503 store down under `deny`; 400 bad per-request input. */
  readonly status: 200 | 400 | 429 | 503
  readonly decision?: Decision
  /** Header name to value, to set on the response whatever the status. */
  readonly headers: Record<string, string>
  /** The `application/problem+json` body for a non-200 status. */
  readonly body?: ProblemDetails
  /**
   * Call with the final status code and the framework's response once the response is sent (refunds under
   * skipFailed/SuccessfulRequests, asking `requestWasSuccessful` when set; without `res`, the status decides).
   * Returns the refund in flight, if any, for runtimes that end a request's I/O with its response
   * (Workers: hand it to `waitUntil`); it never rejects.
   */
  readonly settle?: (statusCode: number, res?: unknown) => Promise<void> | undefined
  /**
   * Set when the decision holds concurrency leases or the `settle` option is on: call it, with the
   * framework's response, when the response ends without a status to settle on (the client went away,
   * the connection closed, the handler threw past the adapter). Ends the leases and settles the cost
   * unless `settle` already did; harmless to call more than once or after `settle`. `settle` itself does
   * both too, so an adapter calls `settle` on a finished response and `release` on close.
   */
  readonly release?: (res?: unknown) => Promise<void> | undefined
}

/**
 * Content type of the problem bodies (400, 429, 503), the same from every adapter. With the charset:
 * Fastify appends one to any JSON type that lacks it, so the others send it too (JSON is UTF-8 anyway).
 */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8'

// Inline limiter options (with `store`), checked as the limiter checks them. `onStoreError` and `shadow`
// are HTTP options too (per-route overrides, passed on each call), so they may go with `limiter`.
const { onStoreError: _onStoreError, shadow: _shadow, ...INLINE_OPTIONS } = LIMITER_OPTIONS
/** The inline limiter option names. */
const LIMITER_OPTION_NAMES: readonly string[] = Object.keys(INLINE_OPTIONS)
/** The policy options: a route that sets any of them gets a limiter of its own. */
const RATE = ['limit', 'window', 'algorithm', 'burst'] as const
const LEASE = ['concurrency', 'lease'] as const
const LIMITS = [...RATE, ...LEASE, 'policies'] as const

/**
 * The options every adapter shares, with their checks (options.ts). An adapter adds its own with
 * {@link createHttpLimiter}'s `adapterOptions`.
 */
const GROUP = /^[\x21-\x7e]{1,64}$/
/** An HTTP field name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

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

/**
 * A route's options over app-wide ones, for adapters with per-route configuration (Fastify's
 * `config.rateLimit`):
 * - a route `limiter` replaces the app-wide limiter and inline limiter options;
 * - a route's own limits (`limit`/`window`/`algorithm`/`burst`, `concurrency`/`lease`, or `policies`)
 *   make a limiter of its own (replacing the app's kind of limit),
 *   on the app-wide store and prefix (its limiter's, or inline);
 * - a `key` function inherited from the app is scoped to the route template (or to the route's `group`),
 *   like the default key, so the route has a budget of its own; a `key` the route sets is used as given.
 *
 * @param template the route template (`/users/:id`).
 * @example
 * const merged = routeOptions(pluginOptions, { limit: 10, window: '1m' }, '/search')
 * createHttpLimiter(merged, adapterOptions) // a limiter of its own on the plugin's store
 */
export function routeOptions<O extends HttpLimiterOptions<any, any>>(base: O, own: O, template: string): O {
  const merged = { ...base, ...own } as unknown as Record<string, unknown>
  const ownRecord = own as unknown as Record<string, unknown>
  if (own.limiter !== undefined) {
    for (const name of LIMITER_OPTION_NAMES) if (ownRecord[name] === undefined) delete merged[name]
  } else if (LIMITS.some((name) => ownRecord[name] !== undefined)) {
    const inherited = base.limiter instanceof RateLimiter ? base.limiter : undefined
    delete merged.limiter
    merged.store ??= inherited?.store
    merged.prefix ??= inherited?.prefix
    // A route's own limits on the app's prefix are the documented pattern: their keys carry the route
    // (or the route's own key), so they are not checked against the app's limiter; a group's routes
    // share their keys, so they are checked against each other.
    const group = merged.group
    ;(merged as { [KEY_SCOPE]?: string | null })[KEY_SCOPE] =
      typeof group === 'string' ? `group:${group}` : null
    // The route's kind of limit replaces the app's: named policies, a concurrency limit, or a rate.
    const other =
      own.policies !== undefined
        ? LIMITS.filter((name) => name !== 'policies')
        : own.concurrency !== undefined || own.lease !== undefined
          ? ['policies', ...RATE]
          : ['policies', ...LEASE]
    for (const name of other) if (ownRecord[name] === undefined) delete merged[name]
  }
  // A route's own key decides its whole key: an inherited group does not apply to it.
  if (own.key !== undefined && own.group === undefined) delete merged.group
  if (own.key === undefined && base.key !== undefined) {
    // An inherited key is scoped like the default key: to the route's group, else to its template.
    const group = merged.group
    merged.key = scopedKey(base.key, typeof group === 'string' ? `group:${group}` : template)
    if (typeof group === 'string') delete merged.group
  }
  return merged as O
}

/** An inherited key, scoped to a route like the default key (empty keys stay empty: they are a 400). */
function scopedKey<Req>(key: NonNullable<HttpLimiterOptions<Req>['key']>, template: string) {
  const scope = ` ${template}`
  const one = (k: unknown) => (typeof k === 'string' && k !== '' ? k + scope : k) as string
  const scopeInput = (input: KeyInput): KeyInput => {
    if (typeof input !== 'object' || input === null) return one(input)
    return Object.fromEntries(Object.entries(input).map(([policy, k]) => [policy, one(k)]))
  }
  return (req: Req, info: KeyInfo): MaybePromise<KeyInput> => {
    const input = key(req, info)
    // A synchronous key stays synchronous (no await, no deadline entry).
    return isThenable(input) ? input.then(scopeInput) : scopeInput(input)
  }
}

const warned = new Set<string>()
/** Logs a warning once per process and code (e.g. a permissive trust-proxy setting). */
export function warnOnce(code: string, message: string, log: (line: string) => void = console.warn): void {
  if (warned.has(code)) return
  warned.add(code)
  log(`[tollgate] ${code}: ${message}`)
}

/** The warning adapters give for `trust proxy = true` and the like: any client can then pick its IP. */
export function warnPermissiveTrustProxy(setting: string): void {
  warnOnce(
    'WARN_TOLLGATE_PERMISSIVE_TRUST_PROXY',
    `${setting} trusts every X-Forwarded-For hop, so any client can choose the IP it is limited by. ` +
      'Trust only your proxies (a hop count or their addresses).',
  )
}

/**
 * Validates adapter options once, at construction (the shared ones and the adapter's own, registered
 * as `adapterOptions`), and returns the per-request handler.
 *
 * @example
 * const http = createHttpLimiter<Request>(options, { onLimited: check.fn })
 * const result = await http.check(req, { ip: req.ip, route: req.route?.path })
 */
export function createHttpLimiter<Req>(
  options: HttpLimiterOptions<Req, any>,
  adapterOptions: OptionSchema = {},
): HttpLimiter<Req> {
  return new HttpLimiter(options, adapterOptions)
}

/** See {@link createHttpLimiter}. */
export class HttpLimiter<Req> {
  private readonly pick: (req: Req) => RateLimiter
  private readonly keyFn?: (req: Req, info: KeyInfo) => MaybePromise<KeyInput>
  /** `group:<name>`, what the default key carries instead of the route template. */
  private readonly group?: string
  /**
   * Whether the default key needs the matched route (`RequestFacts.route`): not with a `key` function or a
   * `group`. An adapter reads the route only then, so no request pays for a template nobody uses.
   */
  readonly needsRoute: boolean
  /** Whether the `settle` option is on (an adapter then settles a streamed body when it ends). */
  readonly settles: boolean
  private readonly costFn?: (req: Req) => MaybePromise<CallCost>
  private readonly limitsFn?: (req: Req) => MaybePromise<CallLimits>
  private readonly fixedCost:
    | { cost: CallCost; onStoreError?: StoreErrorPolicy; shadow?: boolean }
    | undefined
  private readonly skip?: (req: Req) => MaybePromise<boolean>
  private readonly format: HeaderFormat
  private readonly legacy: boolean
  /** Whether a request that succeeded (true) or failed (false) is refunded. */
  private readonly refundOn?: (successful: boolean) => boolean
  private readonly successful?: (req: Req, res: unknown) => MaybePromise<boolean>
  /** The `settle` option: the true cost of a finished (or abandoned) request. */
  private readonly actualCost?: (req: Req, res: unknown) => MaybePromise<CallCost | undefined>
  private readonly shadow: boolean
  private readonly ipOptions: { ipv6Subnet: number | false }
  private readonly onStoreError?: StoreErrorPolicy
  /** Hoisted: the header options are the same for every request. */
  private readonly headerOptions: RateLimitHeaderOptions

  constructor(options: HttpLimiterOptions<Req, any>, adapterOptions: OptionSchema) {
    const o = checkHttpOptions(options, adapterOptions) as HttpLimiterOptions<Req, any> &
      Record<string, unknown>
    if (o.limiter !== undefined) {
      const limiter = o.limiter
      if (limiter instanceof RateLimiter) this.pick = () => limiter
      else {
        this.pick = (req) => {
          const picked = limiter(req)
          if (!(picked instanceof RateLimiter)) throw new InputError('limiter(req)', 'a RateLimiter', picked)
          return picked
        }
      }
    } else {
      if (o.store === undefined) {
        throw new ConfigError(
          'limiter',
          'a RateLimiter (or inline limiter options with a store)',
          undefined,
          'type',
        )
      }
      const inline = LIMITER_OPTION_NAMES.filter((name) => o[name] !== undefined)
      const limiter = inKeyScope(
        (o as { [KEY_SCOPE]?: string | null })[KEY_SCOPE],
        () =>
          new RateLimiter(
            Object.fromEntries(inline.map((name) => [name, o[name]])) as unknown as RateLimiterOptions,
          ),
      )
      this.pick = () => limiter
    }
    this.limitsFn = o.limits
    this.keyFn = o.key
    this.skip = o.skip
    if (o.group !== undefined) {
      if (o.key !== undefined) {
        throw new ConfigError(
          'group',
          'omitted when key is given (the key function decides the whole key)',
          o.group,
          'type',
        )
      }
      this.group = `group:${o.group}`
    }
    this.needsRoute = this.keyFn === undefined && this.group === undefined
    if (typeof o.cost === 'function') this.costFn = o.cost
    this.format = o.headers ?? 'ietf'
    this.legacy = o.legacyHeaders ?? false
    this.shadow = o.shadow ?? false
    const failed = o.skipFailedRequests ?? false
    const succeeded = o.skipSuccessfulRequests ?? false
    if (failed && succeeded) this.refundOn = () => true
    else if (failed) this.refundOn = (ok) => !ok
    else if (succeeded) this.refundOn = (ok) => ok
    if (o.requestWasSuccessful !== undefined) {
      if (!failed && !succeeded) {
        throw new ConfigError(
          'requestWasSuccessful',
          'used with skipFailedRequests or skipSuccessfulRequests (alone it decides nothing)',
          o.requestWasSuccessful,
          'type',
        )
      }
      this.successful = o.requestWasSuccessful as (req: Req, res: unknown) => MaybePromise<boolean>
    }
    this.settles = o.settle !== undefined
    if (typeof o.settle === 'function') this.actualCost = o.settle
    else if (o.settle !== undefined) {
      const name = o.settle.header.toLowerCase()
      this.actualCost = (_req, res) => headerCost(res, name)
    }
    this.ipOptions = { ipv6Subnet: resolveIpv6Subnet(o.ipv6Subnet) }
    this.onStoreError = o.onStoreError
    this.headerOptions = { format: this.format, legacy: this.legacy, retryAfter: !this.shadow }
    // Hoisted: the call options of a fixed-cost route are the same object for every request.
    this.fixedCost = this.costFn
      ? undefined
      : {
          cost: (o.cost as CallCost | undefined) ?? 1,
          onStoreError: this.onStoreError,
          shadow: this.shadow || undefined,
        }
  }

  /** The canonical client IP of a request (InputError, so a 400, when missing or unparseable). */
  clientIp(facts: RequestFacts): string {
    try {
      return canonicalIp(facts.ip, this.ipOptions)
    } catch {
      throw new InputError('client IP', 'a valid address (check the trust-proxy setting)', facts.ip)
    }
  }

  /**
   * The default key: canonical IP, plus the group (`group:<name>`) or else the route template for
   * route-level middleware. Never the method: one budget per route, whichever methods it answers (HEAD,
   * GET and the rest alike). A route template starts with `/`, so no group can share a route's budget.
   */
  defaultKey(facts: RequestFacts): string {
    const ip = this.clientIp(facts)
    const route = this.group ?? facts.route
    return route === undefined ? ip : `${ip} ${route}`
  }

  /**
   * Decides one request. Resolves `undefined` when `skip` says so. Never rejects for a denial or (under
   * a failure policy) a store outage or a `key`/`cost` function past the deadline; rejects only for
   * programming errors (a throwing `key` function).
   */
  async check(req: Req, facts: RequestFacts): Promise<HttpResult | undefined> {
    if (this.skip !== undefined) {
      const skipped = this.skip(req)
      if (isThenable(skipped) ? await skipped : skipped) return undefined
    }
    let decision: Decision
    let limiter: RateLimiter
    try {
      limiter = this.pick(req)
      // Functions that answer synchronously cost no await and no deadline entry.
      // A closure, not a method: key functions destructure it (`(req, { ip }) => ip()`).
      const maybeKey =
        this.keyFn === undefined
          ? this.defaultKey(facts)
          : this.keyFn(req, { ip: () => this.clientIp(facts) })
      // Each input function runs after the ones before it have settled, as it would without a deadline.
      let maybeCost: MaybePromise<CallCost> | undefined
      if (this.costFn !== undefined && !isThenable(maybeKey)) maybeCost = this.costFn(req)
      const limitsFn = this.limitsFn
      const limitsNow = limitsFn !== undefined && !isThenable(maybeKey) && !isThenable(maybeCost)
      let maybeLimits = limitsNow ? limitsFn(req) : undefined
      let key: KeyInput
      let cost: CallCost | undefined
      if (isThenable(maybeKey) || isThenable(maybeCost) || isThenable(maybeLimits)) {
        // One deadline entry for every input still pending.
        const inputs = await this.settleInputs(limiter, req, maybeKey, maybeCost, limitsNow, maybeLimits)
        if (inputs === undefined) return this.unsettled(limiter, req)
        key = inputs.key
        cost = inputs.cost
        maybeLimits = inputs.limits
      } else {
        key = maybeKey
        cost = maybeCost
      }
      // A cost function's answer is checked here, by its name: undefined must not become the default 1.
      // A record (costs by policy) is checked by the limiter, value by value.
      if (
        this.costFn !== undefined &&
        !(Number.isSafeInteger(cost) && (cost as number) >= 0) &&
        (typeof cost !== 'object' || cost === null || Array.isArray(cost))
      ) {
        throw new InputError('cost(req)', 'a non-negative safe integer or a record of costs by policy', cost)
      }
      const limits = maybeLimits as CallLimits | undefined
      if (limitsFn === undefined) {
        decision = await limiter.consume(
          key,
          this.fixedCost ?? { cost, onStoreError: this.onStoreError, shadow: this.shadow || undefined },
        )
      } else {
        // undefined is not "the limiter's own limits": a plan that could not be read is refused, not widened
        if (limits === undefined) throw new InputError('limits(req)', 'a limit or a record of limits', limits)
        decision = await limiter.consume(key, {
          cost: this.fixedCost?.cost ?? cost,
          onStoreError: this.onStoreError,
          shadow: this.shadow || undefined,
          limits,
        })
      }
    } catch (error) {
      if (error instanceof InputError) {
        // Bad per-request input is refused, never waved through.
        return {
          status: 400,
          headers: {},
          body: { type: 'about:blank', title: 'Bad Request', status: 400, detail: error.message },
        }
      }
      throw error
    }
    return this.answer(limiter, decision, req)
  }

  private answer(limiter: RateLimiter, decision: Decision, req: Req): HttpResult {
    const headers =
      this.format === false && !this.legacy && decision.allowed
        ? {}
        : rateLimitHeaders(decision, this.headerOptions)
    if (decision.source === 'fallback' && !decision.allowed) {
      return { status: 503, decision, headers, body: unavailableProblem(decision.retryAfterMs) }
    }
    if (this.actualCost && decision.allowed && decision.source === 'store' && decision.refundToken) {
      return { status: 200, decision, headers, ...this.settlement(limiter, decision, req) }
    }
    if (limiter.leases && decision.allowed && decision.refundToken !== undefined) {
      return { status: 200, decision, headers, ...this.leaseEnd(limiter, decision, req) }
    }
    const settle =
      this.refundOn && decision.allowed && decision.source === 'store'
        ? (statusCode: number, res?: unknown) => this.settle(limiter, decision, req, statusCode, res)
        : undefined
    if (decision.allowed || this.shadow) return { status: 200, decision, headers, settle }
    return { status: 429, decision, headers, body: problemDetails(decision) }
  }

  /** Refunds a finished request when its outcome says so. */
  private settle(
    limiter: RateLimiter,
    decision: Decision,
    req: Req,
    statusCode: number,
    res: unknown,
  ): Promise<void> | undefined {
    const refund = this.refunds(req, statusCode, res)
    if (isThenable(refund)) {
      return refund.then((yes) => (yes ? limiter.refund(decision) : undefined)).then(noop, ignore)
    }
    return refund ? limiter.refund(decision).then(noop, ignore) : undefined
  }

  /**
   * Whether a finished request is refunded under skipFailedRequests / skipSuccessfulRequests: the status,
   * or `requestWasSuccessful` when set and given the response. A predicate that throws, rejects or answers
   * anything but a boolean counts the request (false): it can never hand out a free one. Never rejects.
   */
  private refunds(req: Req, statusCode: number, res: unknown): MaybePromise<boolean> {
    const refundOn = this.refundOn
    if (refundOn === undefined) return false
    let ok: MaybePromise<boolean>
    if (this.successful === undefined || res === undefined) ok = statusCode < 400
    else {
      try {
        ok = this.successful(req, res)
      } catch {
        return false
      }
    }
    if (isThenable(ok))
      return ok.then(
        (v) => typeof v === 'boolean' && refundOn(v),
        () => false,
      )
    return typeof ok === 'boolean' && refundOn(ok)
  }

  /**
   * `settle` and `release` under the `settle` option: whichever runs first settles the spend to the true
   * cost (unless skipFailed/SuccessfulRequests refunds it), then ends any leases, once.
   */
  private settlement(
    limiter: RateLimiter,
    decision: Decision,
    req: Req,
  ): Pick<HttpResult, 'settle' | 'release'> {
    let ended = false
    const leases = limiter.leases
    const charge = (res: unknown): Promise<void> => {
      let cost: MaybePromise<CallCost | undefined>
      try {
        cost = this.actualCost!(req, res)
      } catch {
        cost = undefined
      }
      // a record goes to settle() as it is, which refuses a bad one (the spend then stands)
      const apply = (n: CallCost | undefined) =>
        isCount(n) || (typeof n === 'object' && n !== null) ? limiter.settle(decision, n) : undefined
      const settled = isThenable(cost) ? cost.then(apply, noop) : Promise.resolve(apply(cost))
      return leases ? settled.finally(() => limiter.release(decision)) : settled
    }
    return {
      settle: (statusCode, res) => {
        if (ended) return undefined
        ended = true
        const refund = this.refunds(req, statusCode, res)
        const end = (yes: boolean) => (yes ? limiter.refund(decision) : charge(res))
        return (isThenable(refund) ? refund.then(end) : end(refund)).then(noop, ignore)
      },
      release: (res) => {
        if (ended) return undefined
        ended = true
        return charge(res).then(noop, ignore)
      },
    }
  }

  /**
   * `settle` and `release` of a decision holding leases: whichever runs first ends them, once. A refund
   * (skipFailedRequests / skipSuccessfulRequests) gives back every pair's spend, the leases included.
   */
  private leaseEnd(
    limiter: RateLimiter,
    decision: Decision,
    req: Req,
  ): Pick<HttpResult, 'settle' | 'release'> {
    let ended = false
    const end = (refund: boolean) => (refund ? limiter.refund(decision) : limiter.release(decision))
    return {
      settle: (statusCode, res) => {
        if (ended) return undefined
        ended = true
        const refund = decision.source === 'store' ? this.refunds(req, statusCode, res) : false
        return (isThenable(refund) ? refund.then(end) : end(refund)).then(noop, ignore)
      },
      release: () => {
        if (ended) return undefined
        ended = true
        return limiter.release(decision).then(noop, ignore)
      },
    }
  }

  /**
   * Awaits an async key, cost and limits under the limiter's deadline, one entry for all of them (the
   * same single-timer queue as its store calls). Resolves `undefined` past the deadline; a function that throws still rejects (a 500).
   */
  private async settleInputs(
    limiter: RateLimiter,
    req: Req,
    key: MaybePromise<KeyInput>,
    cost: MaybePromise<CallCost> | undefined,
    limitsCalled: boolean,
    limits: MaybePromise<CallLimits | undefined>,
  ): Promise<{ key: KeyInput; cost: CallCost | undefined; limits: CallLimits | undefined } | undefined> {
    const costFn = this.costFn
    const limitsFn = this.limitsFn
    const all = async () => {
      const settledKey = await key
      // Each function runs after the ones before it, as it does without a deadline.
      const settledCost = cost !== undefined || costFn === undefined ? await cost : await costFn(req)
      const settledLimits = limitsCalled || limitsFn === undefined ? await limits : await limitsFn(req)
      return { key: settledKey, cost: settledCost, limits: settledLimits }
    }
    try {
      return await limiter.deadlines.run(all())
    } catch (error) {
      if (error instanceof StoreTimeoutError) return undefined
      throw error
    }
  }

  /**
   * The answer when `key` or `cost` did not settle before the deadline: the failure policy, as for a store
   * outage. `'local'` has no identity to charge locally, so it refuses like `'deny'`.
   */
  private unsettled(limiter: RateLimiter, req: Req): HttpResult {
    const allowed = (this.onStoreError ?? limiter.onStoreError) === 'allow'
    return this.answer(
      limiter,
      {
        allowed,
        limit: 0,
        remaining: 0,
        resetMs: 0,
        retryAfterMs: allowed ? 0 : limiter.breaker.retryInMs(),
        cost: costNumber(this.fixedCost?.cost ?? 1),
        policies: [],
        binding: -1,
        source: 'fallback',
      },
      req,
    )
  }
}

/** A response header's value as a cost (Node's `getHeader`, Fetch `Headers`), or undefined. */
function headerCost(res: unknown, name: string): number | undefined {
  const r = res as { getHeader?: (n: string) => unknown; headers?: { get?: (n: string) => unknown } }
  let value: unknown
  if (typeof r?.getHeader === 'function') value = r.getHeader(name)
  else if (typeof r?.headers?.get === 'function') value = r.headers.get(name)
  if (typeof value === 'number') return value
  if (typeof value !== 'string' || !/^\d{1,16}$/.test(value.trim())) return undefined
  return Number(value.trim())
}

/** What a failure-policy decision reports as its cost: the largest of a record's. */
function costNumber(cost: CallCost): number {
  return typeof cost === 'number' ? cost : Math.max(0, ...Object.values(cost).filter(isCount))
}

/** Whether a value is a cost: a non-negative safe integer. */
function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0
}

function isThenable<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | undefined)?.then === 'function'
}

function ignore(error: unknown): void {
  // A failed refund only means the spend stands: the conservative outcome. Store errors are reported
  // through the limiter's events; anything else is a bug worth surfacing.
  if (!(error instanceof RateLimitError))
    queueMicrotask(() => {
      throw error
    })
}

function noop(): void {}
