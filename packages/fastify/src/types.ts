/**
 * The option types of `@tollgate/fastify`, in one place, each with its default.
 * @module
 */
import type { Decision } from '@tollgate/core'
import type { HttpLimiterOptions } from '@tollgate/http'
import type { FastifyReply, FastifyRequest } from 'fastify'

/**
 * The request phase the limiter runs in. `'onRequest'` runs before the body is read, so a refused request
 * costs no parsing; `'preValidation'` and `'preHandler'` see `request.body` (and what auth hooks set).
 * @example
 * const hook: RateLimitHook = 'preHandler' // key on request.body.email
 */
export type RateLimitHook = 'onRequest' | 'preValidation' | 'preHandler'

/**
 * Answers a refused request (429) instead of the default `application/problem+json` body. The reply already
 * has status 429 and the RateLimit and Retry-After headers. Return the payload to send, or send it yourself
 * and `return reply`; `undefined` sends the default body.
 * @example
 * const onLimited: OnLimited = (request, reply, decision) => ({ error: 'slow down', retryInMs: decision.retryAfterMs })
 */
export type OnLimited = (request: FastifyRequest, reply: FastifyReply, decision: Decision) => unknown

/**
 * Options of one route's `config: { rateLimit }`, merged over the plugin's. A route that sets its own
 * `limit`/`window`/`policies` gets a limiter of its own on the plugin's store. The default key of a route
 * with its own options is `<ip> <route template>` (never the method: one budget whichever methods the route
 * answers), and a `key` function it inherits from the plugin is scoped the same way, so the route has a
 * budget of its own; a `key` the route sets is used as given.
 * @example
 * app.get('/search', { config: { rateLimit: { limit: 10, window: '1m' } } }, search)
 */
export interface TollgateRouteOptions extends HttpLimiterOptions<FastifyRequest, FastifyReply> {
  /** When the limiter runs. @default 'onRequest' */
  hook?: RateLimitHook
  /** Custom 429 answer. @default an RFC 9457 problem (quota-exceeded) */
  onLimited?: OnLimited
}

/**
 * Plugin options: the limiter (or its options inline) and the defaults every route inherits.
 * @example
 * await app.register(tollgate, { limiter: new RateLimiter({ store, limit: 100, window: '1m' }) })
 */
export interface TollgateOptions extends TollgateRouteOptions {
  /** Limit every route; `false` limits only routes with `config: { rateLimit: { … } }`. @default true */
  global?: boolean
  /** Also limit requests that reach a not-found handler, on the app-wide budget. @default false */
  notFound?: boolean
}
