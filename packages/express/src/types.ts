/**
 * The option types of `@tollgate/express`, in one place, each with its default.
 * @module
 */
import type { Decision } from '@tollgate/core'
import type { HttpLimiterOptions } from '@tollgate/http'
import type { NextFunction, Request, Response } from 'express'

/**
 * Answers a refused request instead of the default 429 `application/problem+json` body. The RateLimit
 * headers and `Retry-After` are already set on `res`, and `req.rateLimit` holds the decision. Call
 * `next()` to let the request through after all; throw or reject to hand an error to `next(err)`.
 *
 * @example
 * const onLimited: OnLimited = (req, res, _next, decision) => {
 *   res.status(429).json({ error: 'slow down', retryInMs: decision.retryAfterMs })
 * }
 */
export type OnLimited = (req: Request, res: Response, next: NextFunction, decision: Decision) => unknown

/**
 * Options of {@link rateLimit}: the core vocabulary shared by every adapter (`limiter`, `key`, `cost`,
 * `skip`, `headers`, `legacyHeaders`, `skipFailedRequests`, `skipSuccessfulRequests`, `shadow`,
 * `ipv6Subnet`, `onStoreError`, or inline limiter options with `store`), plus `onLimited`.
 * Functions receive Express's `req`. See docs/adapters/express.md for the full table.
 *
 * @example
 * const options: RateLimitOptions = {
 *   limiter: new RateLimiter({ store, limit: 100, window: '1m' }),
 *   key: (req) => req.get('x-api-key') ?? req.ip ?? '',
 *   headers: 'ietf',        // @default 'ietf'
 *   legacyHeaders: false,   // @default false
 * }
 */
export interface RateLimitOptions extends HttpLimiterOptions<Request, Response> {
  /**
   * Answers refused requests (429) your way.
   * @default a 429 with `application/problem+json` (RFC 9457, type `…#quota-exceeded`, `violated-policies`)
   */
  onLimited?: OnLimited
}

declare global {
  namespace Express {
    interface Request {
      /**
       * The decision of the last `rateLimit()` middleware this request passed (`undefined` when none
       * ran, the request was skipped, or its input was rejected with 400 or 500).
       *
       * @example
       * app.get('/quota', rateLimit({ limiter }), (req, res) => res.json({ left: req.rateLimit?.remaining }))
       */
      rateLimit?: import('@tollgate/core').Decision
    }
  }
}
