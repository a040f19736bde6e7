/**
 * Tollgate on Fastify, runnable: `REDIS_URL=redis://127.0.0.1:6379 PORT=3000 node --import tsx index.ts`
 *
 * - every route: 100 requests per minute per client IP (the plugin, registered once);
 * - `GET /search`: a stricter budget of its own, 10 per minute per client IP (`config.rateLimit`);
 * - `GET /catalog/search` and `GET /catalog/suggest`: one shared budget of 20 per minute per client IP
 *   (`group: 'catalog'`), whichever of the two a client calls;
 * - `POST /login`: keyed on the body's email, so the limiter runs in `preHandler` (after the body is
 *   parsed); 5 wrong passwords per account per 15 minutes; successful logins are refunded, and so are
 *   malformed requests (400: not a guess), through `requestWasSuccessful`;
 * - `GET /health`: never limited (`config: { rateLimit: false }`).
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import tollgate from '@tollgate/fastify'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import Fastify from 'fastify'
import { register } from 'prom-client'
import { createClient } from 'redis'

const PORT = Number(process.env.PORT ?? 3000)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = process.env.TOLLGATE_PREFIX ?? 'example-fastify'
/**
 * The addresses of your proxies (comma-separated IPs or CIDRs), or nothing when clients connect directly.
 * Never `true`: every client could then choose the IP it is limited by.
 */
const TRUSTED_PROXIES = process.env.TRUSTED_PROXIES || false

// Demo users; a real app checks a password hash.
const USERS = new Map([
  ['ada@example.com', 'correct horse'],
  ['bob@example.com', 'battery staple'],
])

async function main(): Promise<void> {
  const redis = createClient({ url: REDIS_URL }).on('error', (err) => console.warn('redis:', err.message))
  redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
  const store = new RedisStore(redis)

  // Metrics for every limiter in the process, labelled by each limiter's `name`.
  collectTollgateMetrics()
  const api = new RateLimiter({ store, name: 'api', prefix: `${PREFIX}:api`, limit: 100, window: '1m' })
  const logins = new RateLimiter({
    store,
    name: 'login',
    prefix: `${PREFIX}:login`,
    limit: 5,
    window: '15m',
    algorithm: 'fixed-window',
  })

  const catalog = new RateLimiter({
    store,
    name: 'catalog',
    prefix: `${PREFIX}:catalog`,
    limit: 20,
    window: '1m',
  })

  const app = Fastify({ trustProxy: TRUSTED_PROXIES })
  // Awaited: routes declared after this line are limited.
  await app.register(tollgate, { limiter: api })

  app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }))
  // Prometheus scrapes this (keep it off the public listener in production).
  app.get('/metrics', { config: { rateLimit: false } }, async (_request, reply) =>
    reply.type(register.contentType).send(await register.metrics()),
  )

  app.get('/hello', async (request) => ({ hello: 'world', remaining: request.rateLimit?.remaining }))

  // Own limit and window: a limiter of its own on the plugin's store, keyed `<ip> /search`.
  app.get('/search', { config: { rateLimit: { limit: 10, window: '1m' } } }, async (request) => {
    const { q = '' } = request.query as { q?: string }
    return { results: [], q }
  })

  // Two routes, one budget: the group replaces the route template in the default key (`<ip> group:catalog`).
  const shared = { config: { rateLimit: { limiter: catalog, group: 'catalog' } } }
  app.get('/catalog/search', shared, async () => ({ results: [] }))
  app.get('/catalog/suggest', shared, async () => ({ suggestions: [] }))

  app.post(
    '/login',
    {
      config: {
        rateLimit: {
          limiter: logins,
          hook: 'preHandler', // the key needs the parsed body
          // no string email: keyed on the IP, never one shared `email:` budget
          key: (request, { ip }) => {
            const email = emailOf(request.body)
            return email ? `email:${email}` : `ip:${ip()}`
          },
          skipSuccessfulRequests: true, // only failed attempts count...
          // ...and a failed attempt is a wrong password (401), not a malformed request (400)
          requestWasSuccessful: (_request, reply) => reply.statusCode !== 401,
        },
      },
    },
    async (request, reply) => {
      const { password } = (request.body ?? {}) as { password?: unknown }
      if (emailOf(request.body) === '' || typeof password !== 'string')
        return reply.code(400).send({ ok: false })
      if (USERS.get(emailOf(request.body)) !== password) return reply.code(401).send({ ok: false })
      return { ok: true }
    },
  )

  await app.listen({ port: PORT, host: process.env.HOST ?? '127.0.0.1' })
  console.log(`listening on http://127.0.0.1:${PORT}`)
  const stop = () => {
    const closing = app.close()
    app.server.closeAllConnections()
    closing.finally(() => redis.quit().finally(() => process.exit(0)))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

function emailOf(body: unknown): string {
  const email = (body as { email?: unknown } | undefined)?.email
  return typeof email === 'string' ? email.trim().toLowerCase() : ''
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
