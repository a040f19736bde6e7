/**
 * One HTTP server of `pnpm demo` (scripts/demo.mjs starts one per framework, and one for the outage):
 * `node --import tsx scripts/demo-http-server.mts` with DEMO_FRAMEWORK (express | fastify | hono),
 * DEMO_ROLE (burst | outage), DEMO_PREFIX and REDIS_URL (without it: a MemoryStore in this process). It
 * builds a small app from the Tollgate adapter (benchmarks/lib/http-apps.mts, which resolves the
 * frameworks from the benchmarks package), listens on a free port and reports it over IPC.
 *
 * - `burst`:  GET /burst limited to 5 per minute per client IP (route-level middleware).
 * - `outage`: POST /login limited to 5 per minute with `onStoreError: 'deny'` (503 while Redis is down),
 *             GET /api limited to 100 per minute with `onStoreError: 'allow'` (admitted, no RateLimit
 *             headers, while Redis is down). Every other limiter option at its default (500 ms store
 *             deadline; the breaker opens after 3 failures and probes once a second).
 */
import { MemoryStore, RateLimiter, RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { type AppSpec, FRAMEWORKS, type Framework, startApp } from '../benchmarks/lib/http-apps.mts'

const framework = process.env.DEMO_FRAMEWORK as Framework
const role = process.env.DEMO_ROLE ?? 'burst'
const prefix = process.env.DEMO_PREFIX ?? 'demo-http'
const url = process.env.REDIS_URL
if (!FRAMEWORKS.includes(framework)) throw new Error(`DEMO_FRAMEWORK must be one of ${FRAMEWORKS}`)

process.on('disconnect', () => process.exit(0)) // the parent is gone (Ctrl-C, crash): do not linger

let store: RedisStore | MemoryStore
let quit = async () => {}
if (url) {
  // As an app should set it up: it survives an outage and boots without Redis. The errors are expected
  // during the outage (each failed reconnect): the demo shows their effect instead.
  const redis = createClient({ url }).on('error', () => {})
  redis.connect().catch(() => {}) // the failure policy answers until it is ready
  store = new RedisStore(redis)
  if (!redis.isReady) await new Promise((resolve) => redis.once('ready', resolve)) // the demo starts with Redis up
  quit = async () => {
    await redis.quit()
  }
} else {
  store = new MemoryStore()
}

const spec: AppSpec =
  role === 'outage'
    ? {
        framework,
        routes: [
          {
            method: 'POST',
            path: '/login',
            tollgate: {
              limiter: new RateLimiter({ store, prefix: `${prefix}:login`, limit: 5, window: '1m' }),
              onStoreError: 'deny',
            },
            body: { ok: true },
          },
          {
            method: 'GET',
            path: '/api',
            tollgate: {
              limiter: new RateLimiter({ store, prefix: `${prefix}:api`, limit: 100, window: '1m' }),
              onStoreError: 'allow',
            },
            body: { data: 42 },
          },
        ],
      }
    : {
        framework,
        routes: [
          {
            method: 'GET',
            path: '/burst',
            tollgate: { limiter: new RateLimiter({ store, prefix, limit: 5, window: '1m' }) },
          },
        ],
      }

const app = await startApp(spec)
process.on('message', (msg: { type?: string }) => {
  if (msg?.type === 'exit') {
    app
      .close()
      .then(quit)
      .finally(() => process.exit(0))
  }
})
process.send?.({ type: 'ready', port: app.port })
