/**
 * Tollgate on Cloudflare Workers: Hono, `@tollgate/hono`, and `@upstash/redis` (Redis over HTTP, the only
 * Redis a Worker can reach without TCP sockets). The client address is `CF-Connecting-IP`, which
 * Cloudflare sets on every request (a client cannot choose it), read by Hono's Workers `getConnInfo`.
 *
 * - `/api/*`: 10 requests per 10 s per client address (sliding window).
 * - `/login` (POST): 5 failed attempts per 15 min per address and account; a success is refunded.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { rateLimiter } from '@tollgate/hono'
import { Redis } from '@upstash/redis/cloudflare'
import { type ExecutionContext, Hono } from 'hono'
import { getConnInfo } from 'hono/cloudflare-workers'

export interface Env {
  UPSTASH_REDIS_REST_URL: string
  UPSTASH_REDIS_REST_TOKEN: string
  TOLLGATE_PREFIX?: string
  /** The limiters' deadline in ms. @default 1000 */
  TOLLGATE_TIMEOUT_MS?: string
}

function build(env: Env): Hono<{ Bindings: Env }> {
  // One client, store and limiters per isolate: a Worker reuses its isolate across requests.
  const store = new RedisStore(
    new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN }),
  )
  const prefix = env.TOLLGATE_PREFIX ?? 'hono-workers'
  // A REST round trip from a Worker to the database's region takes longer than a local socket: give
  // the store call 1 s before the failure policy answers (and the request is aborted).
  const timeoutMs = Number(env.TOLLGATE_TIMEOUT_MS ?? 1000)
  const api = new RateLimiter({ store, prefix: `${prefix}-api`, limit: 10, window: '10s', timeoutMs })
  const login = new RateLimiter({
    store,
    prefix: `${prefix}-login`,
    policies: { ip: { limit: 20, window: '15m' }, account: { limit: 5, window: '15m' } },
    timeoutMs,
  })

  const app = new Hono<{ Bindings: Env }>()
  app.use('/api/*', rateLimiter({ limiter: api, getConnInfo }))
  app.get('/api/hello', (c) => c.json({ hello: 'world', remaining: c.get('rateLimit')?.remaining }))
  app.post(
    '/login',
    rateLimiter({
      limiter: login,
      getConnInfo,
      // Key on the address and the account named in the body (no string email: the address, never one
      // shared `email:` budget); only failures count.
      key: async (c, info) => {
        const body = await c.req.json().catch(() => undefined)
        const email = typeof body?.email === 'string' ? body.email.trim().toLowerCase() : ''
        return { ip: `ip:${info.ip()}`, account: email ? `email:${email}` : `ip:${info.ip()}` }
      },
      skipSuccessfulRequests: true,
    }),
    async (c) => {
      const { password } = await c.req.json().catch(() => ({}))
      return password === 'correct horse' ? c.json({ ok: true }) : c.json({ ok: false }, 401)
    },
  )
  return app
}

let app: Hono<{ Bindings: Env }> | undefined

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response> {
    app ??= build(env)
    return app.fetch(request, env, ctx)
  },
}
