/**
 * Declaration merging: `request.rateLimit` and `config: { rateLimit }` on routes are typed as soon as
 * `@tollgate/fastify` is imported anywhere in the program.
 * @module
 */
import type { Decision } from '@tollgate/core'
import type { TollgateRouteOptions } from './types'

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The limiter's decision for this request: `undefined` on routes that are not limited, for requests
     * that `skip` let through, and before the limiter's hook has run.
     * @example
     * app.get('/quota', async (request) => ({ remaining: request.rateLimit?.remaining }))
     */
    rateLimit?: Decision
  }
  interface FastifyContextConfig {
    /**
     * This route's own limiter options (merged over the plugin's), or `false` to leave the route unlimited.
     * @default the plugin's options when registered with `global: true` (the default), else not limited
     * @example
     * app.get('/search', { config: { rateLimit: { limit: 10, window: '1m' } } }, search)
     */
    rateLimit?: TollgateRouteOptions | false
  }
}
