/**
 * `@tollgate/hono`: the `rateLimiter()` middleware for Hono. It only maps Hono's context onto the
 * framework-neutral layer of `@tollgate/core` (`createHttpLimiter`), so it behaves like the Express and
 * Fastify adapters: same options, same headers, same 429 / 503 bodies.
 *
 * Hono runs on many runtimes and none of them gives a portable client address, so the address is
 * injected (`getConnInfo` from your runtime adapter, as Hono's own `ipRestriction` does), or you key
 * requests yourself with `key`.
 * @module
 */
import { ConfigError, type Decision } from '@tollgate/core'
import {
  check,
  createHttpLimiter,
  FrameworkFacts,
  forwardedAddress,
  type HttpLimiterOptions,
  type OptionSchema,
  onBodyEnd,
  PROBLEM_CONTENT_TYPE,
} from '@tollgate/http'
import type { Context, Env, MiddlewareHandler } from 'hono'
import type { ConnInfo } from 'hono/conninfo'
import { matchedRoutes } from 'hono/route'

/**
 * What the middleware stores on the context: `c.get('rateLimit')` is the decision of the last Tollgate
 * limiter that ran (undefined when `skip` skipped it or the request was refused for bad input).
 * @example
 * const app = new Hono<{ Variables: RateLimitVariables }>()
 * app.get('/quota', (c) => c.json({ remaining: c.get('rateLimit')?.remaining }))
 */
export type RateLimitVariables = { rateLimit?: Decision }

/**
 * A Hono `Env` carrying {@link RateLimitVariables}, for `new Hono<RateLimitEnv>()` or to intersect with yours.
 * @example
 * type AppEnv = RateLimitEnv & { Bindings: { REDIS_URL: string } }
 */
export type RateLimitEnv = { Variables: RateLimitVariables }

declare module 'hono' {
  // Hono's own middleware (request-id, jwt) types its variables this way, so `c.get('rateLimit')` is
  // typed in every app that imports this package, whatever its Env.
  interface ContextVariableMap {
    rateLimit?: Decision
  }
}

/**
 * The runtime's connection info (`getConnInfo` from `@hono/node-server/conninfo`, `hono/bun`,
 * `hono/deno`, `hono/cloudflare-workers`, ...), or any function returning the client address as text.
 * @example
 * import { getConnInfo } from '@hono/node-server/conninfo'
 * const get: GetClientAddress = getConnInfo
 */
export type GetClientAddress = (c: Context) => ConnInfo | string | undefined

/**
 * Options of {@link rateLimiter}: the common Tollgate adapter options (`limiter` or inline limiter
 * options, `key`, `cost`, `skip`, `headers`, `legacyHeaders`, `skipFailedRequests`,
 * `skipSuccessfulRequests`, `shadow`, `ipv6Subnet`, `onStoreError`) plus Hono's runtime facts.
 * Functions receive the Hono `Context`.
 * @example
 * const options: HonoRateLimiterOptions = { limiter: api, getConnInfo, trustProxy: 1 }
 */
export interface HonoRateLimiterOptions<E extends Env = any>
  extends HttpLimiterOptions<Context<E>, Response> {
  /**
   * Where the client address comes from: your runtime's `getConnInfo`. Required unless `key` is given,
   * because Hono has no portable client address.
   * @default undefined (then `key` is required)
   */
  getConnInfo?: GetClientAddress
  /**
   * How many proxy hops in front of the app append to `X-Forwarded-For` and are trusted: the client is
   * the address that many entries from the right (the leftmost, if there are fewer). `0` uses the socket
   * address only and never reads the header. Only set this if the app cannot be reached except through
   * those proxies. `true` is rejected: it would let every client choose its own address.
   * @default 0
   */
  trustProxy?: number
  /**
   * `'app'` keys on the client address alone; `'route'` adds the matched route template (`/users/:id`),
   * never the method, so a route answering several methods has one budget. By default a middleware
   * mounted with a method (`app.get(path, rateLimiter(…), h)`, `app.on([...], …)`) is `'route'`, one
   * mounted with `app.use` or `app.all` is `'app'`. Under `app.use('/api/*', …)` with `'route'`, each
   * handler's template gets its own budget.
   * @default inferred from how the middleware is mounted
   */
  scope?: 'app' | 'route'
  /**
   * Builds the 429 response (the RateLimit and Retry-After headers are added to it if missing). Throw an
   * `HTTPException` here to route refusals through `app.onError`.
   * @default a 429 `application/problem+json` body (RFC 9457, `quota-exceeded`)
   */
  onLimited?: (c: Context<E>, decision: Decision) => Response | Promise<Response>
}

/** The options Hono adds to the shared ones, with their checks. */
const HONO_OPTIONS: OptionSchema = {
  getConnInfo: check.fn,
  trustProxy(value, option) {
    // `true` would let every client choose its address: say so rather than only "a number".
    if (value === true)
      throw new ConfigError(
        option,
        'a number of proxy hops, 0 or more (true would let any client choose its address)',
        value,
        'type',
      )
    check.count(value, option)
  },
  scope: check.oneOf(['app', 'route']),
  onLimited: check.fn,
}
const ALL = 'ALL' // the method `app.use` and `app.all` register under
const NO_ADDRESS =
  "a function: your runtime's getConnInfo ('@hono/node-server/conninfo', 'hono/bun', 'hono/deno', …), " +
  'or give a key function instead (Hono has no portable client address)'

/**
 * The client address of a request: the socket address from `getConnInfo`, or with `trustProxy` hops,
 * the `X-Forwarded-For` entry that many hops from the right. Raw text (canonicalise with `canonicalIp`).
 * Handy in a `key` function that combines the address with something else.
 *
 * @param trustProxy proxy hops, as the middleware's option (default 0: the socket address only).
 * @example
 * // in a key function, prefer info.ip(): the same address, already canonical
 * const raw = clientAddress(c, getConnInfo, 1)
 */
export function clientAddress(c: Context, getConnInfo: GetClientAddress, trustProxy = 0): string | undefined {
  const info = getConnInfo(c)
  const socket = typeof info === 'string' ? info : info?.remote.address
  if (trustProxy === 0) return socket
  return forwardedAddress(socket, c.req.header('x-forwarded-for'), trustProxy)
}

/** The route template for the key, or undefined for an app-wide limiter. Must run before `next()`. */
function routeTemplate(c: Context, scope: 'app' | 'route' | undefined): string | undefined {
  if (scope === 'app') return undefined
  const routes = matchedRoutes(c)
  const index = c.req.routeIndex
  const own = routes[index]!
  if (own.method !== ALL) return own.path
  if (scope !== 'route') return undefined
  // Mounted with app.use/app.all but asked for per-route budgets: the first method route after us is
  // the handler that will answer.
  for (let i = index + 1; i < routes.length; i++) if (routes[i]!.method !== ALL) return routes[i]!.path
  return own.path
}

/**
 * Rate-limits requests with a Tollgate `RateLimiter`: sets the RateLimit headers, answers 429
 * (`application/problem+json`, or `onLimited`) without running the handler, 503 when the store is down
 * under `onStoreError: 'deny'`, and exposes the decision as `c.get('rateLimit')`.
 *
 * @param options see {@link HonoRateLimiterOptions}; validated here, throwing `ConfigError`.
 * @example
 * import { Hono } from 'hono'
 * import { serve } from '@hono/node-server'
 * import { getConnInfo } from '@hono/node-server/conninfo'
 * import { rateLimiter } from '@tollgate/hono'
 *
 * const app = new Hono()
 * app.use('/api/*', rateLimiter({ limiter: api, getConnInfo }))                 // per client address
 * app.get('/users/:id', rateLimiter({ limiter: strict, getConnInfo }), getUser)   // per address + /users/:id
 * serve(app)
 */
export const rateLimiter = <E extends Env = any>(
  options: HonoRateLimiterOptions<E>,
): MiddlewareHandler<E> => {
  const http = createHttpLimiter<Context<E>>(options, HONO_OPTIONS)
  const { getConnInfo, trustProxy = 0, scope, onLimited, key } = options
  // Which facts a request needs depends on two options together: checked here, in the same style.
  if (getConnInfo === undefined && key === undefined) {
    throw new ConfigError('getConnInfo', NO_ADDRESS, getConnInfo, 'type')
  }
  if (trustProxy > 0 && getConnInfo === undefined) {
    throw new ConfigError(
      'trustProxy',
      'used with getConnInfo (a key function picks its own identity)',
      trustProxy,
    )
  }
  // The route only feeds the default key (http.needsRoute: no key function, no group). The address is
  // read lazily (a getter), so a key function that never calls `info.ip()` does not pay for it either.
  const routed = http.needsRoute

  return async function rateLimiter(c, next) {
    const result = await http.check(
      c,
      new HonoFacts(c, getConnInfo, trustProxy, routed ? routeTemplate(c, scope) : undefined),
    )
    if (result === undefined) return next()
    c.set('rateLimit', result.decision)
    const headers = result.headers
    if (result.status === 429 && onLimited !== undefined) {
      for (const name in headers) c.header(lower(name), headers[name])
      return withHeaders(await onLimited(c, result.decision!), headers)
    }
    if (result.status !== 200) {
      return c.body(result.bodyText ?? JSON.stringify(result.body), result.status, problemHeaders(headers))
    }
    for (const name in headers) c.header(lower(name), headers[name])
    // Leases end when the handler is done (below), or as soon as the client goes away (the runtime
    // aborts the request's signal: @hono/node-server, Bun, Deno, Workers).
    const release = result.release
    if (release) c.req.raw.signal?.addEventListener('abort', () => release(c.res), { once: true })
    try {
      await next()
    } catch (error) {
      const refund = result.settle?.(500)
      if (refund) waitUntil(c, refund)
      throw error
    }
    // A handler that returns a bare `new Response()` drops headers set before next(): add them back
    // (checking the first name is enough, they are set together).
    for (const name in headers) {
      if (!c.res.headers.has(lower(name))) for (const n in headers) c.header(lower(n), headers[n])
      break
    }
    const settle = result.settle
    if (settle && release && c.res.body && c.res.status >= 200) {
      // A body read after this returns (a stream): settled, and leases ended, once it has been read to
      // its end, or when the client cancels it (with what was produced so far).
      const keep = (p: Promise<void> | undefined) => p && waitUntil(c, p)
      c.res = onBodyEnd(
        c.res,
        () => keep(settle(c.res.status, c.res)),
        () => keep(release?.(c.res)),
      )
      return
    }
    const refund = settle?.(c.res.status, c.res)
    // On Workers the request's I/O ends with its response: keep the refund alive past it.
    if (refund) waitUntil(c, refund)
  }
}

/**
 * Header names as `Headers` keeps them: it lower-cases every name it is given, a new string each time
 * unless the name is lower-case already. Hono's `c.header` goes through one, so the names are passed
 * lower-cased (what the wire gets anyway). Only the limiter's own few names pass through here.
 */
const lowerNames = new Map<string, string>()
function lower(name: string): string {
  let lowered = lowerNames.get(name)
  if (lowered === undefined) {
    lowered = name.toLowerCase()
    lowerNames.set(name, lowered)
  }
  return lowered
}

/** The request facts of a context: Hono has no address of its own, so it comes from `getConnInfo`. */
class HonoFacts extends FrameworkFacts<Context> {
  // `declare`: plain assignments in the constructor, not class fields defined on every instance.
  declare private readonly getConnInfo: GetClientAddress | undefined
  declare private readonly trustProxy: number
  constructor(c: Context, getConnInfo: GetClientAddress | undefined, trustProxy: number, route?: string) {
    super(c, route)
    this.getConnInfo = getConnInfo
    this.trustProxy = trustProxy
  }
  override get ip(): string | undefined {
    return this.getConnInfo === undefined
      ? undefined
      : clientAddress(this.req, this.getConnInfo, this.trustProxy)
  }
}

/**
 * The headers of a problem response: the limiter's, then the content type. Copied name by name: a spread
 * followed by a new name makes V8 build a fresh hidden class on every call.
 */
function problemHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name in headers) out[name] = headers[name]!
  out['Content-Type'] = PROBLEM_CONTENT_TYPE
  return out
}

function waitUntil(c: Context, promise: Promise<void>): void {
  let ctx: { waitUntil?: (p: Promise<unknown>) => void } | undefined
  try {
    ctx = c.executionCtx // throws where the runtime has none (Node, Bun, Deno)
  } catch {
    return
  }
  ctx?.waitUntil?.(promise)
}

function withHeaders(res: Response, headers: Record<string, string>): Response {
  let out = res
  for (const name in headers) {
    const lowered = lower(name)
    if (out.headers.has(lowered)) continue
    if (out === res) out = new Response(res.body, res) // headers of a fetched Response are immutable
    out.headers.set(lowered, headers[name]!)
  }
  return out
}
