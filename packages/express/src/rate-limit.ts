/**
 * `rateLimit(options)`: Tollgate as Express middleware (Express 4 and 5). It only maps Express's request
 * and response onto the shared HTTP layer of `@tollgate/core` (`createHttpLimiter`).
 * @module
 */
import {
  check,
  createHttpLimiter,
  FrameworkFacts,
  type OptionSchema,
  PROBLEM_CONTENT_TYPE,
  warnPermissiveTrustProxy,
} from '@tollgate/http'
import type { NextFunction, Request, Response } from 'express'
import type { RateLimitOptions } from './types'

/** The options Express adds to the shared ones, with their checks. */
const EXPRESS_OPTIONS: OptionSchema = { onLimited: check.fn }

/** The middleware {@link rateLimit} returns: an Express request handler (async; errors go to `next`). */
export type RateLimitMiddleware = (req: Request, res: Response, next: NextFunction) => Promise<void>

/**
 * Creates rate-limiting middleware. Options are validated here, once: a bad one throws `ConfigError`
 * before the app serves anything.
 *
 * - `app.use(rateLimit(...))` (or `router.use`): keyed on the client IP, one budget across every route.
 * - On a route (`app.get('/users/:id', rateLimit(...), handler)`): keyed on client IP + the route's
 *   template (`/users/:id`), so `/users/1`, `/USERS/1/` and `/users/1?x` share one budget. The method is
 *   not part of the key: a route for several methods (`app.all`, `app.route(p).get(…).post(…)`) has one
 *   budget, so a client cannot multiply it by changing the method.
 *
 * The client IP is `req.ip`, so forwarded headers count only through Express's `trust proxy` setting
 * (set it to your proxy hop count; `true` is warned about once, since any client can then pick its IP).
 *
 * @example
 * import { rateLimit } from '@tollgate/express'
 * const api = new RateLimiter({ store: new RedisStore(redis), limit: 100, window: '1m' })
 * app.set('trust proxy', 1)
 * app.use(rateLimit({ limiter: api }))
 * app.post('/login', express.json(), rateLimit({ limiter: login, key: (req, { ip }) => ({ ip: ip(), account: req.body.email }) }), handler)
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const http = createHttpLimiter<Request>(options, EXPRESS_OPTIONS)
  const onLimited = options.onLimited

  // The setting is read on the first request (the app is known only then); the warning is once anyway.
  let trustChecked = false

  return async function rateLimitMiddleware(req: Request, res: Response, next: NextFunction): Promise<void> {
    let result: Awaited<ReturnType<typeof http.check>>
    try {
      if (!trustChecked) {
        trustChecked = true
        if (req.app.get('trust proxy') === true) warnPermissiveTrustProxy("Express 'trust proxy' = true")
      }
      const route = http.needsRoute ? routeTemplate(req, rateLimitMiddleware) : undefined
      // `req.ip` runs Express's proxy-address walk: the facts read it only if the key needs the address.
      result = await http.check(req, new FrameworkFacts(req, route))
    } catch (error) {
      return next(error)
    }
    if (result === undefined) return next()
    if (result.decision) req.rateLimit = result.decision
    const headers = result.headers
    for (const name in headers) res.setHeader(name, headers[name]!)
    if (result.status === 200) {
      const settle = result.settle
      if (settle) res.once('finish', () => settle(res.statusCode, res))
      // Leases end, and the `settle` option settles, with the response: finished (settle, above) or not
      // (the client went away, the connection broke): 'close' comes in both cases, after 'finish' when
      // there is one. A streamed response finishes when its stream ends.
      const release = result.release
      if (release) res.once('close', () => release(res))
      return next()
    }
    if (result.status === 429 && onLimited) {
      try {
        await onLimited(req, res, next, result.decision!)
      } catch (error) {
        next(error)
      }
      return
    }
    res.statusCode = result.status
    res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE)
    res.end(result.bodyText ?? JSON.stringify(result.body))
  }
}

/**
 * The matched route's template when this middleware runs in that route's own stack (`req.route` can be
 * left over from an earlier route that called `next()`, so it must list this very function). Mount paths
 * come from `req.baseUrl`, which holds the request's spelling: lower-cased so case variants share one
 * budget (with `case sensitive routing` on, that only merges budgets: never looser).
 */
function routeTemplate(req: Request, self: unknown): string | undefined {
  const route = req.route as { path?: unknown; stack?: Array<{ handle?: unknown }> } | undefined
  const stack = route?.stack
  if (stack === undefined) return undefined
  for (let i = 0; i < stack.length; i++) {
    if (stack[i]!.handle === self) {
      const base = req.baseUrl
      return base === '' ? String(route!.path) : `${base.toLowerCase()}${String(route!.path)}`
    }
  }
  return undefined
}
