/**
 * Tollgate on Express, runnable: `REDIS_URL=redis://127.0.0.1:6379 PORT=3000 node --import tsx index.ts`
 *
 * - `/api/*`: limited app-wide, 100 requests per minute per client IP (sliding window);
 * - `GET /api/report`: per-plan limits on top (free 10/min, pro 100/min), keyed on the API key: one
 *   limiter, the plan's limit sent with each request (`limits`);
 * - `POST /login`: two policies (per IP and per account); only failed attempts are charged
 *   (`attempt()` spends first, a successful login refunds); an account refused for too many failures is
 *   locked out for 15 minutes, twice as long each time it happens again (a `penalty`, up to a day).
 *
 * With `TOLLGATE_STORAGE=compact`, the window counters are stored compact: a field of a shared hash per
 * client instead of a key each (docs/storage.md), placed by a secret each prefix keeps in Redis, or by
 * `TOLLGATE_SECRET` when it is set (the same in every process).
 */
import { type Decision, RateLimitedError, RateLimiter, RedisStore } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import { canonicalIp, problemDetails, rateLimitHeaders } from '@tollgate/http'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import express, { type Response } from 'express'
import { register } from 'prom-client'
import { createClient } from 'redis'

const PORT = Number(process.env.PORT ?? 3000)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = process.env.TOLLGATE_PREFIX ?? 'example-express'
/** Proxy hops in front of the app (0 = clients connect directly). Never `true`: clients could pick their IP. */
const TRUST_PROXY = Number(process.env.TRUST_PROXY ?? 0)
const SECRET = process.env.TOLLGATE_SECRET
const COMPACT = process.env.TOLLGATE_STORAGE === 'compact' || SECRET !== undefined

// Demo users; a real app checks a password hash.
const USERS = new Map([
  ['ada@example.com', 'correct horse'],
  ['bob@example.com', 'battery staple'],
])
/** Requests per minute by plan: data (a real app reads it from the API key's record). */
const PLAN_LIMITS = { free: 10, pro: 100 }
const API_KEYS = new Map<string, keyof typeof PLAN_LIMITS>([
  ['k_free_1', 'free'],
  ['k_pro_1', 'pro'],
])

async function main(): Promise<void> {
  const redis = createClient({ url: REDIS_URL }).on('error', (err) => console.warn('redis:', err.message))
  redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
  const store = new RedisStore(
    redis,
    COMPACT ? { storage: 'compact', ...(SECRET ? { secret: SECRET } : {}) } : {},
  )

  // Metrics for every limiter in the process, labelled by each limiter's `name`.
  collectTollgateMetrics()
  const api = new RateLimiter({
    store,
    name: 'api',
    prefix: `${PREFIX}:api`,
    limit: 100,
    window: '1m',
    algorithm: 'sliding-window',
  })
  // One limiter for every plan: each request carries its plan's limit (10 unless the key is known).
  const plans = new RateLimiter({ store, name: 'plan', prefix: `${PREFIX}:plan`, limit: 10, window: '1m' })
  const login = new RateLimiter({
    store,
    name: 'login',
    prefix: `${PREFIX}:login`,
    policies: {
      ip: { limit: 20, window: '15m' },
      account: {
        limit: 5,
        window: '15m',
        algorithm: 'fixed-window',
        // the first refusal locks the account for 15 min, 30 min the next time, ... at most a day;
        // decided in the same script as the refusal, lifted only by login.reset()
        penalty: { block: '15m', factor: 2, max: '1d' },
      },
    },
  })

  const app = express()
  app.set('trust proxy', TRUST_PROXY)

  // Prometheus scrapes this (keep it off the public listener in production).
  app.get('/metrics', async (_req, res) => {
    res.type(register.contentType).send(await register.metrics())
  })
  app.use('/api', rateLimit({ limiter: api }))
  app.get('/api/hello', (req, res) => {
    res.json({ hello: 'world', remaining: req.rateLimit?.remaining })
  })
  app.get(
    '/api/report',
    rateLimit({
      // Tiers: the plan's limit is data, sent with the request's one script call.
      limiter: plans,
      // no API key: keyed on the client IP, never one budget shared by every anonymous client
      key: (req, { ip }) => (req.get('x-api-key') ? `apikey:${req.get('x-api-key')}` : `ip:${ip()}`),
      limits: (req) => PLAN_LIMITS[API_KEYS.get(req.get('x-api-key') ?? '') ?? 'free'],
    }),
    (req, res) => {
      res.json({ report: 'ok', plan: API_KEYS.get(req.get('x-api-key') ?? '') ?? 'free' })
    },
  )

  app.post('/login', express.json(), async (req, res, next) => {
    const email = String(req.body?.email ?? '').toLowerCase()
    const password = String(req.body?.password ?? '')
    if (!email || !req.ip) {
      res.status(400).json({ error: 'email required' })
      return
    }
    try {
      // canonicalIp folds IPv4-mapped spellings and masks IPv6 to its /56, so rotating addresses
      // inside one allocation does not escape the per-IP policy
      await login.attempt({ ip: `ip:${canonicalIp(req.ip)}`, account: `email:${email}` }, async (attempt) => {
        if (USERS.get(email) === password) {
          await attempt.refund() // a successful login costs nothing
          res.json({ ok: true })
        } else {
          setHeaders(res, attempt.decision)
          res.status(401).json({ ok: false })
        }
      })
    } catch (error) {
      if (!(error instanceof RateLimitedError)) return next(error)
      setHeaders(res, error.decision)
      res
        .status(429)
        .type('application/problem+json')
        .send(JSON.stringify(problemDetails(error.decision)))
    }
  })

  const server = app.listen(PORT, process.env.HOST ?? '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${PORT}`)
  })
  const stop = () => {
    server.close()
    server.closeAllConnections()
    redis.quit().finally(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

function setHeaders(res: Response, decision: Decision): void {
  res.set(rateLimitHeaders(decision, { format: 'ietf' }))
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
