/**
 * One server process of the HTTP benchmark (and of its smoke test): `node --import tsx http-server.mts`
 * with HTTP_FRAMEWORK (express | fastify | hono), HTTP_VARIANT (bare | tollgate | peer | refused),
 * REDIS_URL and HTTP_PREFIX (a Redis key prefix) in the environment. It listens on a free port on
 * 127.0.0.1 and reports it over IPC (`{ type: 'ready', port, limiter }`); on `{ type: 'stats' }` it
 * answers with the limiter events counted so far (`{ type: 'stats', events }`). It exits when the parent
 * disconnects (so Ctrl-C or a crash of the parent never leaves it behind). The counts include the
 * process's CPU time, so the benchmark can report the server's CPU per request.
 *
 * Tollgate runs as an app would: `new RateLimiter({ store: new RedisStore(client), limit, window })` on a
 * default client of the peer's library (ioredis 6 on Fastify, node-redis 6 on Express and Hono), with every
 * other option at its default (sliding-window, 500 ms deadline,
 * deny cache on, `onStoreError: 'allow'`). Its fallbacks and timeouts are counted, so a run that passed the
 * deadline and admitted without Redis is flagged, not silently fast.
 * @module
 */
import { RateLimiter, RedisStore, type TollgateEvent } from '@tollgate/core'
import { createClient } from 'redis'
import { type AppSpec, FRAMEWORKS, type Framework, startApp } from './http-apps.mts'
import {
  emptyEvents,
  HIGH_LIMIT,
  HIGH_WINDOW_MS,
  IDENTITY_HEADER,
  keyedOnHeader,
  PATH,
  REFUSED_LIMIT,
  REFUSED_WINDOW_MS,
  VARIANTS,
  type Variant,
} from './http-variants.mts'

const framework = process.env.HTTP_FRAMEWORK as Framework
const variant = process.env.HTTP_VARIANT as Variant
const redisUrl = process.env.REDIS_URL
const prefix = process.env.HTTP_PREFIX ?? `bench-http-${framework}-${variant}`
if (!FRAMEWORKS.includes(framework)) throw new Error(`HTTP_FRAMEWORK must be one of ${FRAMEWORKS}`)
if (!VARIANTS.includes(variant)) throw new Error(`HTTP_VARIANT must be one of ${VARIANTS}`)
if (!redisUrl) throw new Error('REDIS_URL is not set')

const events = emptyEvents()
const onEvent = (e: TollgateEvent) => {
  if (e.type in events) events[e.type as Exclude<keyof typeof events, 'cpuUs'>]++
}

const spec: AppSpec = {
  framework,
  routes: [{ method: 'GET', path: PATH }],
  identityHeader: keyedOnHeader(variant) ? IDENTITY_HEADER : undefined,
}
let closeClient = async () => {}
if (variant === 'tollgate' || variant === 'refused' || variant === 'tollgate-10k') {
  // The peer's client library: @fastify/rate-limit takes an ioredis client, the other two peers run on
  // node-redis here.
  let store: RedisStore
  if (framework === 'fastify') {
    const { Redis } = await import('ioredis')
    const client = new Redis(redisUrl)
    client.on('error', (e: Error) => console.error(`${framework}/${variant} ioredis: ${e.message}`))
    closeClient = async () => {
      await client.quit()
    }
    store = new RedisStore(client)
  } else {
    const client = createClient({ url: redisUrl })
    client.on('error', (e: Error) => console.error(`${framework}/${variant} node-redis: ${e.message}`))
    await client.connect()
    closeClient = async () => {
      await client.quit()
    }
    store = new RedisStore(client)
  }
  const limiter = new RateLimiter({
    store,
    prefix,
    ...(variant === 'refused'
      ? { limit: REFUSED_LIMIT, window: REFUSED_WINDOW_MS }
      : { limit: HIGH_LIMIT, window: HIGH_WINDOW_MS }),
    onEvent,
  })
  spec.tollgate = { limiter }
} else if (variant === 'peer' || variant === 'peer-10k') {
  spec.peer = { redisUrl, prefix: `${prefix}:`, limit: HIGH_LIMIT, windowMs: HIGH_WINDOW_MS }
}

const app = await startApp(spec)

// BENCH_HTTP_CPU_PROF=<dir>: a V8 CPU profile from now (listening: start-up and tsx's compiling left out)
// to exit, written to <dir>/<framework>-<variant>.cpuprofile. Summarise with `http-profile.mts`.
const profileDir = process.env.BENCH_HTTP_CPU_PROF
let stopProfile = async () => {}
if (profileDir) {
  const { Session } = await import('node:inspector/promises')
  const fs = await import('node:fs')
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.start')
  stopProfile = async () => {
    const { profile } = await session.post('Profiler.stop')
    fs.mkdirSync(profileDir, { recursive: true })
    fs.writeFileSync(`${profileDir}/${framework}-${variant}.cpuprofile`, JSON.stringify(profile))
  }
}

let stopping = false
async function stop(): Promise<never> {
  if (!stopping) {
    stopping = true
    await stopProfile().catch((e: Error) => console.error(`profile: ${e.message}`))
    await app.close().catch(() => {})
    await closeClient().catch(() => {})
  }
  process.exit(0)
}
process.on('disconnect', stop)
process.on('SIGTERM', stop)
process.on('message', (msg: { type?: string }) => {
  if (msg?.type === 'stats') {
    const cpu = process.cpuUsage()
    process.send?.({ type: 'stats', events: { ...events, cpuUs: cpu.user + cpu.system } })
  } else if (msg?.type === 'stop') void stop()
})
process.send?.({ type: 'ready', port: app.port, limiter: app.limiterName, pid: process.pid })
