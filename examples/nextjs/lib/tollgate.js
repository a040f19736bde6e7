// The limiters, shared by the proxy and the route handlers of this server.
import { RateLimiter, RedisStore } from '@tollgate/core'
import { redis } from './redis.js'

const store = new RedisStore(redis())
const prefix = process.env.TOLLGATE_PREFIX ?? 'next'

/** The home page, limited in the proxy (a page has no handler to wrap). */
export const pages = new RateLimiter({ store, prefix: `${prefix}-pages`, limit: 5, window: '1m' })
/** The API route, limited in its route handler. */
export const api = new RateLimiter({ store, prefix: `${prefix}-api`, limit: 3, window: '1m' })

/**
 * The client address. Next.js gives none to route handlers or the proxy, so it comes from a header set
 * by the proxy in front of the app: Vercel sets `x-real-ip` and overwrites what the client sent. Deploy
 * this only behind such a proxy (any client can send the header to an app reached directly). Without
 * the header the request is refused with 400, never pooled with others.
 */
export const ip = (req) => req.headers.get('x-real-ip') ?? undefined
