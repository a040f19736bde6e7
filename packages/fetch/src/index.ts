/**
 * `@tollgate/fetch`: rate limiting for handlers written as `(Request) => Response` (Next.js route handlers
 * and middleware, `Bun.serve`, `Deno.serve`, Cloudflare Workers). It only maps a `Request` onto the
 * framework-neutral layer of `@tollgate/core` (`createHttpLimiter`), so it behaves like the Express,
 * Fastify and Hono adapters: same options, same headers, same 429 / 503 bodies.
 *
 * No runtime gives a portable client address, and a header is only as honest as the proxy that sets it,
 * so the address comes from a function you give (`ip`), or you key requests yourself with `key`.
 *
 * The other direction too: `limitedFetch` wraps `fetch` for the calls an app makes to an upstream that
 * limits it, one budget for the whole fleet that follows the upstream's own rate limit fields.
 * @module
 */
import { ConfigError, type Decision } from '@tollgate/core'
import {
  check,
  createHttpLimiter,
  FrameworkFacts,
  type HttpLimiter,
  type HttpLimiterOptions,
  type HttpResult,
  type OptionSchema,
  onBodyEnd,
  PROBLEM_CONTENT_TYPE,
} from '@tollgate/http'

type MaybePromise<T> = T | Promise<T>

/**
 * Options of {@link checkRateLimit} and {@link withRateLimit}: the common Tollgate adapter options
 * (`limiter` or inline limiter options, `key`, `cost`, `skip`, `limits`, `group`, `headers`,
 * `legacyHeaders`, `skipFailedRequests`, `skipSuccessfulRequests`, `requestWasSuccessful`, `shadow`,
 * `ipv6Subnet`, `onStoreError`) plus where the client address comes from. Functions receive the `Request`.
 * `A` is the handler's arguments after the request (Bun's `server`, Deno's `info`, Workers' `env, ctx`).
 * @example
 * const options: FetchRateLimitOptions<[Deno.ServeHandlerInfo]> = {
 *   limiter,
 *   ip: (req, info) => info.remoteAddr.hostname,
 * }
 */
export interface FetchRateLimitOptions<A extends unknown[] = any[]>
  extends HttpLimiterOptions<Request, Response> {
  /**
   * The client address of a request, as text. It gets the request and the handler's other arguments:
   * Bun `(req, server) => server.requestIP(req)?.address`, Deno `(req, info) => info.remoteAddr.hostname`,
   * Workers `(req) => req.headers.get('cf-connecting-ip')`. Read a forwarded header only when a proxy
   * you control sets it and the app cannot be reached around that proxy: any client can send one.
   * Required unless `key` is given (there is no default: guessing a header would let clients pick their
   * own address).
   * @default undefined (then `key` is required)
   */
  ip?: (req: Request, ...args: A) => string | null | undefined
  /**
   * A route template for the default key (`'/users/[id]'`), so this handler has a budget of its own even
   * with a limiter other handlers use too. Never derived from the URL: `/users/1` and `/users/2` are one
   * route, and a client chooses its path freely. Not accepted with `key` or `group`, which decide the key.
   * @default none: the default key is the client address alone
   */
  route?: string
  /**
   * Builds the 429 response (the RateLimit and Retry-After headers are added to it if missing).
   * @default a 429 `application/problem+json` body (RFC 9457, `quota-exceeded`)
   */
  onLimited?: (req: Request, decision: Decision) => MaybePromise<Response>
  /**
   * Keeps a refund (`skipFailedRequests` / `skipSuccessfulRequests`) alive past the response on runtimes
   * that end a request's work with it. By default the first handler argument with a `waitUntil` method
   * gets it: Workers' `ctx`, Next.js middleware's `event`.
   * @default `waitUntil` of the first handler argument that has one
   * @example
   * import { after } from 'next/server'
   * withRateLimit(handler, { limiter, ip, skipFailedRequests: true, waitUntil: after })
   */
  waitUntil?: (promise: Promise<void>, req: Request, ...args: A) => void
}

/**
 * What {@link checkRateLimit} decides for one request.
 * @example
 * const { decision, headers, response, done } = await checkRateLimit(req, options)
 * if (response) return response
 * const res = Response.json({ remaining: decision?.remaining }, { headers })
 * done(res)
 * return res
 */
export interface RateLimitResult {
  /** The limiter's decision; undefined when `skip` skipped the request or its input was refused (400, 500). */
  readonly decision: Decision | undefined
  /**
   * The RateLimit headers to add to your response (none when skipped, or under `onStoreError: 'allow'`
   * while the store is down). Also a valid `HeadersInit`.
   */
  readonly headers: Readonly<Record<string, string>>
  /**
   * The answer to send instead of running your handler: the 429 (or `onLimited`'s), the 503 when the
   * store is down under `onStoreError: 'deny'`, a 400 for input the client caused, a 500 when your `key`
   * (or `cost`, `limits`) function answered a value the limiter refuses. Undefined: go on.
   */
  readonly response: Response | undefined
  /**
   * Call with your handler's `Response` (or its status, e.g. `500` when it threw) once you have it:
   * refunds under `skipFailedRequests` / `skipSuccessfulRequests` and ends concurrency leases. Harmless
   * when there is nothing to do, or when called twice. The promise never rejects; on Workers hand it to
   * `ctx.waitUntil`.
   */
  done(response: Response | number): Promise<void>
}

/** The options this package adds to the shared ones, with their checks. */
const FETCH_OPTIONS: OptionSchema = {
  ip: check.fn,
  route(value, option) {
    if (typeof value !== 'string' || !ROUTE.test(value))
      throw new ConfigError(
        option,
        "a route template starting with '/', printable ASCII, at most 256 characters",
        value,
      )
  },
  onLimited: check.fn,
  waitUntil: check.fn,
}
const ROUTE = /^\/[\x21-\x7e]{0,255}$/
const NO_ADDRESS =
  'a function returning the client address (Bun: server.requestIP(req), Deno: info.remoteAddr, ' +
  'Workers: the CF-Connecting-IP header), or give a key function instead (a Request carries no address)'

const EMPTY: Readonly<Record<string, string>> = Object.freeze({})
const settled: Promise<void> = Promise.resolve()
const nothingToDo = (_response?: Response | number): Promise<void> => settled
const SKIPPED: RateLimitResult = Object.freeze({
  decision: undefined,
  headers: EMPTY,
  response: undefined,
  done: nothingToDo,
})

/** One set of checked options: what both entry points run per request. */
class FetchLimiter<A extends unknown[]> {
  declare readonly http: HttpLimiter<Request>
  declare private readonly ipFn: ((req: Request, ...args: A) => string | null | undefined) | undefined
  declare private readonly route: string | undefined
  declare private readonly onLimited: FetchRateLimitOptions<A>['onLimited']
  declare private readonly waitUntilFn: FetchRateLimitOptions<A>['waitUntil']

  constructor(options: FetchRateLimitOptions<A>) {
    this.http = createHttpLimiter<Request>(options, FETCH_OPTIONS)
    const { ip, key, group, route } = options
    // Which facts a request needs depends on options together: checked here, in the same style.
    if (ip === undefined && key === undefined) throw new ConfigError('ip', NO_ADDRESS, ip, 'type')
    if (route !== undefined && (key !== undefined || group !== undefined)) {
      throw new ConfigError(
        'route',
        `omitted when ${key !== undefined ? 'key' : 'group'} is given (it decides the key)`,
        route,
        'type',
      )
    }
    this.ipFn = ip
    this.route = route
    this.onLimited = options.onLimited
    this.waitUntilFn = options.waitUntil
  }

  /** The core's answer, plus the Response to send instead of the handler's when it is not a pass. */
  async decide(req: Request, args: A): Promise<[HttpResult | undefined, Response | undefined]> {
    const result = await this.http.check(req, new FetchFacts(req, args, this.ipFn, this.route))
    if (result === undefined || result.status === 200) return [result, undefined]
    if (result.status === 429 && this.onLimited !== undefined) {
      return [result, withHeaders(await this.onLimited(req, result.decision!), result.headers)]
    }
    const headers = { ...result.headers, 'Content-Type': PROBLEM_CONTENT_TYPE }
    return [result, new Response(JSON.stringify(result.body), { status: result.status, headers })]
  }

  /** Hands a refund in flight to the runtime, so it outlives the response where that matters. */
  keep(promise: Promise<void> | undefined, req: Request, args: A): void {
    if (promise === undefined) return
    if (this.waitUntilFn !== undefined) {
      this.waitUntilFn(promise, req, ...args)
      return
    }
    for (const arg of args) {
      const waitUntil = (arg as { waitUntil?: unknown } | null | undefined)?.waitUntil
      if (typeof waitUntil === 'function') {
        waitUntil.call(arg, promise)
        return
      }
    }
  }
}

/** The request facts of a `Request`, which carries no address: the `ip` option finds it. */
class FetchFacts<A extends unknown[]> extends FrameworkFacts<Request> {
  // `declare`: plain assignments in the constructor, not class fields defined on every instance.
  declare private readonly args: A
  declare private readonly ipFn: ((req: Request, ...args: A) => string | null | undefined) | undefined
  constructor(
    req: Request,
    args: A,
    ipFn: ((req: Request, ...args: A) => string | null | undefined) | undefined,
    route: string | undefined,
  ) {
    super(req, route)
    this.args = args
    this.ipFn = ipFn
  }
  override get ip(): string | undefined {
    return this.ipFn?.(this.req, ...this.args) ?? undefined
  }
}

// Options objects seen by checkRateLimit, checked once each: hoist yours to pay for that once.
const checked = new WeakMap<object, FetchLimiter<any>>()

/**
 * Decides one request: the decision, the RateLimit headers to add to your response, and the response to
 * send instead when the request is refused. For handlers that want to answer themselves (Next.js
 * middleware, a `Bun.serve` router); {@link withRateLimit} wraps a whole handler instead.
 *
 * Build the options object once, outside the handler: it is checked (ConfigError) the first time it is
 * seen. The limiter must be built once too (`limiter: new RateLimiter(...)`); inline limiter options
 * would build one per call, so they are refused here.
 *
 * @param args the handler's arguments after the request, passed to `ip` (Bun's `server`, Deno's `info`).
 * @example
 * const options = { limiter, ip: (req, server) => server.requestIP(req)?.address }
 * Bun.serve({
 *   async fetch(req, server) {
 *     const { headers, response } = await checkRateLimit(req, options, server)
 *     return response ?? new Response('ok', { headers })
 *   },
 * })
 */
export async function checkRateLimit<A extends unknown[] = any[]>(
  request: Request,
  options: FetchRateLimitOptions<A>,
  ...args: A
): Promise<RateLimitResult> {
  let limiter = checked.get(options)
  if (limiter === undefined) {
    if (typeof options === 'object' && options !== null && options.limiter === undefined) {
      throw new ConfigError(
        'limiter',
        'a RateLimiter built once (inline limiter options would build a limiter per call; withRateLimit takes them)',
        undefined,
        'type',
      )
    }
    limiter = new FetchLimiter(options)
    checked.set(options, limiter)
  }
  const [result, response] = await limiter.decide(request, args)
  if (result === undefined) return SKIPPED
  const { settle, release } = result
  let done: RateLimitResult['done'] = nothingToDo
  if (response === undefined && settle !== undefined) {
    let once = false
    done = (res) => {
      if (once) return settled
      once = true
      const status = typeof res === 'number' ? res : res.status
      return settle(status, typeof res === 'number' ? undefined : res) ?? settled
    }
  }
  // A client that goes away before `done` still ends its leases (no response to hand `settle` yet).
  if (release !== undefined) request.signal?.addEventListener('abort', () => release(), { once: true })
  return { decision: result.decision, headers: result.headers, response, done }
}

/**
 * Wraps a fetch handler: refused requests get the 429 (or 503, or `onLimited`'s answer) without running
 * it; the others get the RateLimit headers added to the handler's response, and refunds under
 * `skipFailedRequests` / `skipSuccessfulRequests` once it has answered. The options are checked here
 * (ConfigError). Every argument after the request is passed through to the handler and to `ip`.
 *
 * @example
 * import { RateLimiter, RedisStore } from '@tollgate/core'
 * import { withRateLimit } from '@tollgate/fetch'
 *
 * const limiter = new RateLimiter({ store: new RedisStore(redis), limit: 60, window: '1m' })
 * export default {
 *   fetch: withRateLimit((req) => new Response('ok'), {
 *     limiter,
 *     ip: (req) => req.headers.get('cf-connecting-ip') ?? undefined, // Cloudflare sets it
 *   }),
 * }
 */
export function withRateLimit<H extends unknown[] = any[], I extends unknown[] = any[]>(
  handler: (request: Request, ...args: H) => MaybePromise<Response>,
  options: FetchRateLimitOptions<I>,
): (request: Request, ...args: HandlerArgs<H, I>) => Promise<Response> {
  if (typeof handler !== 'function') throw new ConfigError('handler', 'a function', handler, 'type')
  const limiter = new FetchLimiter<any[]>(options)
  return async function rateLimited(request: Request, ...args: any[]) {
    const [result, refused] = await limiter.decide(request, args)
    if (refused !== undefined) return refused
    if (result === undefined) return handler(request, ...(args as H))
    // Leases end, and the `settle` option settles, when the body has ended or been cancelled (below),
    // or as soon as the client goes away, with the response once there is one.
    const { settle, release } = result
    let response: Response | undefined
    if (release !== undefined) {
      const gone = () => limiter.keep(release(response), request, args)
      request.signal?.addEventListener('abort', gone, { once: true })
    }
    try {
      response = withHeaders(await handler(request, ...(args as H)), result.headers)
    } catch (error) {
      limiter.keep(settle?.(500), request, args)
      throw error
    }
    const res = response
    if (release !== undefined && res.body !== null && !res.bodyUsed && res.status >= 200) {
      // Read by the runtime after this returns: settle once it has produced all it will.
      return onBodyEnd(
        res,
        () => limiter.keep(settle?.(res.status, res), request, args),
        () => limiter.keep(release(res), request, args),
      )
    }
    limiter.keep(settle?.(res.status, res), request, args)
    return res
  }
}

/**
 * The wrapped handler's arguments after the request: the handler's own, or `ip`'s when the handler
 * declares none (a Bun handler that ignores `server` while `ip` reads it).
 */
export type HandlerArgs<H extends unknown[], I extends unknown[]> = H extends [] ? I : H

/**
 * The response with the headers it lacks (an inner limiter's or the handler's own win). A fetched or
 * redirect Response has immutable headers: it is copied then, unless its status cannot be (a 101).
 */
function withHeaders(res: Response, headers: Readonly<Record<string, string>>): Response {
  let out = res
  for (const name in headers) {
    if (out.headers.has(name)) continue
    try {
      out.headers.set(name, headers[name]!)
    } catch {
      if (out !== res || res.status < 200 || res.status > 599) return out
      out = new Response(res.body, res)
      out.headers.set(name, headers[name]!)
    }
  }
  return out
}

export { type LimitedFetch, type LimitedFetchOptions, limitedFetch } from './limited-fetch'
export { type UpstreamBudget, type UpstreamLimits, upstreamLimits } from './upstream-limits'
