/**
 * One process of `pnpm demo` (scripts/demo.mjs starts four). Connects to REDIS_URL (or, without it, uses a
 * MemoryStore and plays DEMO_LANES workers in this one process), warms up, says `ready`, then on each
 * `burst` message fires 25 concurrent calls per lane at the given wall-clock instant and sends back what
 * each call decided and when (ms after that instant).
 *
 * Bursts: `tollgate` = `RateLimiter.consume('demo-user')` (limit 5 per 2 s, sliding-window);
 *         `naive`    = GET the counter, and INCR it if it was below 5: the usual hand-rolled limiter.
 */
import { MemoryStore, RateLimiter, RedisStore } from '@tollgate/core'
import { createClient } from 'redis'

const LIMIT = 5
const WINDOW_MS = 2000
const PER_LANE = 25
const url = process.env.REDIS_URL
const lanes = Number(process.env.DEMO_LANES ?? 1)
const prefix = process.env.DEMO_PREFIX ?? 'demo'

type Burst = { type: 'burst'; kind: 'tollgate' | 'naive'; at: number; key: string }
type Call = { ok: boolean; t: number; retry: number }

const now = () => performance.timeOrigin + performance.now()
const send = (msg: unknown) => process.send?.(msg)
process.on('disconnect', () => process.exit(0)) // the parent is gone (Ctrl-C, crash): do not linger

let naiveGet: (key: string) => Promise<string | null>
let naiveIncr: (key: string) => Promise<void>
let close = async () => {}
let store: RedisStore | MemoryStore

if (url) {
  const redis = createClient({ url }).on('error', (e) =>
    console.warn(`worker ${process.pid}: redis error: ${e.message}`),
  )
  redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
  if (!redis.isReady) await new Promise((resolve) => redis.once('ready', resolve)) // the race needs Redis
  store = new RedisStore(redis)
  naiveGet = (key) => redis.get(key)
  naiveIncr = async (key) => {
    if ((await redis.incr(key)) === 1) await redis.pExpire(key, WINDOW_MS)
  }
  close = async () => {
    await redis.quit()
  }
} else {
  // No Redis: the same naive logic over an in-process map, with a turn of the event loop standing in
  // for each network round trip.
  store = new MemoryStore()
  const counts = new Map<string, number>()
  const roundTrip = () => new Promise((resolve) => setImmediate(resolve))
  naiveGet = async (key) => {
    await roundTrip()
    return counts.has(key) ? String(counts.get(key)) : null
  }
  naiveIncr = async (key) => {
    await roundTrip()
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
}

const limiter = new RateLimiter({ store, prefix, limit: LIMIT, window: WINDOW_MS })

async function naiveConsume(key: string): Promise<boolean> {
  const used = Number((await naiveGet(key)) ?? 0)
  if (used >= LIMIT) return false
  await naiveIncr(key)
  return true
}

async function call(burst: Burst): Promise<Call> {
  if (burst.kind === 'naive') {
    const ok = await naiveConsume(burst.key)
    return { ok, t: now() - burst.at, retry: 0 }
  }
  const d = await limiter.consume(burst.key)
  return { ok: d.allowed, t: now() - burst.at, retry: d.retryAfterMs }
}

async function fire(burst: Burst): Promise<void> {
  const wait = burst.at - now() - 5
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
  while (now() < burst.at) {
    // spin the last few ms so every process fires at the same instant
  }
  const calls: Promise<Call>[][] = []
  for (let l = 0; l < lanes; l++) calls.push(Array.from({ length: PER_LANE }, () => call(burst)))
  const result = await Promise.all(calls.map((lane) => Promise.all(lane)))
  send({ type: 'result', lanes: result })
}

// Warm-up: connection, script cache (EVALSHA, NOSCRIPT, EVAL once), JIT; on keys of their own.
await limiter.consume(`warm-up-${process.pid}`)
await naiveGet(`${prefix}:naive-warm-up`)

process.on('message', (msg: { type: string }) => {
  if (msg.type === 'burst') {
    fire(msg as Burst).catch((e) => {
      console.error(`worker ${process.pid}: ${e?.stack ?? e}`)
      process.exit(1)
    })
  } else if (msg.type === 'exit') {
    close().then(
      () => process.exit(0),
      () => process.exit(0),
    )
  }
})
send({ type: 'ready', pid: process.pid })
