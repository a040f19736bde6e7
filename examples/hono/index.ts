/**
 * Tollgate on Hono, runnable: `REDIS_URL=redis://127.0.0.1:6379 PORT=3000 node --import tsx index.ts`
 *
 * - `/api/*`: 100 requests per minute per client address (sliding window), from @hono/node-server's
 *   `getConnInfo`;
 * - `GET /api/report`: per-plan limits on top, the limiter picked per request from the `X-Api-Key` plan
 *   (free 10/min, pro 100/min), keyed on the API key;
 * - `POST /login`: two policies (per address and per account); `skipSuccessfulRequests` refunds a
 *   successful login, so only failed attempts count.
 */
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { InputError, RateLimiter, RedisStore } from '@tollgate/core'
import { clientAddress, rateLimiter } from '@tollgate/hono'
import { canonicalIp } from '@tollgate/http'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import { type Context, Hono } from 'hono'
import { register } from 'prom-client'
import { createClient } from 'redis'

const PORT = Number(process.env.PORT ?? 3000)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = process.env.TOLLGATE_PREFIX ?? 'example-hono'
/** Proxy hops in front of the app that append to X-Forwarded-For (0 = clients connect directly). */
const TRUST_PROXY = Number(process.env.TRUST_PROXY ?? 0)

// Demo data; a real app checks a password hash and looks keys up in its database.
const USERS = new Map([
  ['ada@example.com', 'correct horse'],
  ['bob@example.com', 'battery staple'],
])
const PLANS = new Map<string, 'free' | 'pro'>([
  ['k_free_1', 'free'],
  ['k_pro_1', 'pro'],
])

/**
 * The client's address as a key part, canonicalised like the default key (IPv4-mapped IPv6 as IPv4, IPv6
 * grouped by /56), so re-spelling or rotating addresses inside one allocation does not buy more guesses.
 * An unreadable address is an `InputError`, which the middleware answers with 400.
 */
function ipKey(c: Context): string {
  const address = clientAddress(c, getConnInfo, TRUST_PROXY)
  try {
    return `ip:${canonicalIp(address)}`
  } catch {
    throw new InputError('client address', 'an IP address', address)
  }
}

async function main(): Promise<void> {
  const redis = createClient({ url: REDIS_URL }).on('error', (err) => console.warn('redis:', err.message))
  redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
  const store = new RedisStore(redis)

  // Metrics for every limiter in the process, labelled by each limiter's `name`.
  collectTollgateMetrics()
  const api = new RateLimiter({ store, name: 'api', prefix: `${PREFIX}:api`, limit: 100, window: '1m' })
  const plans = {
    free: new RateLimiter({
      store,
      name: 'plan-free',
      prefix: `${PREFIX}:plan-free`,
      limit: 10,
      window: '1m',
    }),
    pro: new RateLimiter({ store, name: 'plan-pro', prefix: `${PREFIX}:plan-pro`, limit: 100, window: '1m' }),
  }
  const login = new RateLimiter({
    store,
    name: 'login',
    prefix: `${PREFIX}:login`,
    policies: {
      ip: { limit: 20, window: '15m' },
      account: { limit: 5, window: '15m', algorithm: 'fixed-window' },
    },
  })

  const app = new Hono()
  // Prometheus scrapes this (keep it off the public listener in production).
  app.get('/metrics', async (c) =>
    c.body(await register.metrics(), 200, { 'content-type': register.contentType }),
  )

  // Every /api route: one budget per client address.
  app.use('/api/*', rateLimiter({ limiter: api, getConnInfo, trustProxy: TRUST_PROXY }))
  app.get('/api/hello', (c) => c.json({ hello: 'world', remaining: c.get('rateLimit')?.remaining }))

  // Tiers: the plan picks the limiter, per request, with no extra round trip.
  app.get(
    '/api/report',
    rateLimiter({
      limiter: (c) => (PLANS.get(c.req.header('x-api-key') ?? '') === 'pro' ? plans.pro : plans.free),
      // no API key: keyed on the address, never one budget shared by every anonymous client
      key: (c) => (c.req.header('x-api-key') ? `apikey:${c.req.header('x-api-key')}` : ipKey(c)),
    }),
    (c) => c.json({ report: 'ok', plan: PLANS.get(c.req.header('x-api-key') ?? '') ?? 'free' }),
  )

  // Charged before the handler runs (so concurrent guesses cannot all slip through), refunded when
  // the login succeeds. Hono caches the parsed body, so the handler reads it again for free.
  app.post(
    '/login',
    rateLimiter({
      limiter: login,
      key: async (c) => {
        // no body, broken JSON or no string email: keyed on the address (never one shared `email:` budget)
        const body = await c.req.json().catch(() => ({}))
        const email = typeof body?.email === 'string' ? body.email.trim().toLowerCase() : ''
        return { ip: ipKey(c), account: email ? `email:${email}` : ipKey(c) }
      },
      skipSuccessfulRequests: true,
    }),
    async (c) => {
      const { email, password } = await c.req.json().catch(() => ({}))
      const ok = USERS.get(String(email ?? '').toLowerCase()) === password
      return ok ? c.json({ ok: true }) : c.json({ ok: false }, 401)
    },
  )

  const server = serve(
    { fetch: app.fetch, port: PORT, hostname: process.env.HOST ?? '127.0.0.1' },
    (info) => {
      console.log(`listening on http://127.0.0.1:${info.port}`)
    },
  )
  const stop = () => {
    server.close()
    if ('closeAllConnections' in server) server.closeAllConnections()
    redis.quit().finally(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
