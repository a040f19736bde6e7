/**
 * Recovery after Redis faults, node-redis 6 and ioredis 6 with their default client settings
 * (`node --import tsx benchmarks/recovery.mts`):
 *
 * - restart: Redis killed during traffic, restarted empty after BENCH_OUTAGE_MS. Every 10 ms a tick sends
 *   6 calls in a row on a fresh key of a limit-5 limiter (defaults: `timeoutMs` 500, breaker 3 / 1000 ms,
 *   `onStoreError: 'deny'`). "Enforced" is the end of the first tick whose 6 decisions all come from
 *   Redis, 5 admitted and the 6th refused (the 6th request gets its 429). Times are from the restarted
 *   server answering PING (the testkit's start(), which polls for it shortly after the server accepts
 *   connections) and from the client's 'ready' event.
 * - half-open: the client talks through the testkit's fault proxy, which black-holes the established
 *   connection (new ones still work): time from the black-hole to the first enforced tick, and how many
 *   calls the failure policy answered meanwhile (capped at BENCH_HALF_OPEN_CAP_MS).
 * - charged later: calls answered by the failure policy that were charged afterwards: 3 calls at boot
 *   with Redis down (then Redis starts), and 2 calls in flight on a connection that drops (then the
 *   client reconnects).
 *
 * TOLLGATE_CORE=<path to a core src/index.ts> runs the same measurement against another version of the
 * core (e.g. main's, for before/after figures). Knobs: BENCH_ROUNDS (10), BENCH_OUTAGE_MS (1000),
 * BENCH_HALF_OPEN_ROUNDS (5), BENCH_HALF_OPEN_CAP_MS (20000).
 */
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import Redis from 'ioredis'
import { createClient } from 'redis'
import { startFaultProxy } from '../packages/testkit/src/fault-proxy'
import { freePort, startRedisServer } from '../packages/testkit/src/redis-server'

const here = path.dirname(fileURLToPath(import.meta.url))
const corePath = process.env.TOLLGATE_CORE ?? path.join(here, '../packages/core/src/index.ts')
const core: typeof import('../packages/core/src/index') = await import(pathToFileURL(corePath).href)
const { RateLimiter, RedisStore } = core

const env = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt)
const ROUNDS = env('BENCH_ROUNDS', 10)
const OUTAGE_MS = env('BENCH_OUTAGE_MS', 1000)
const HALF_OPEN_ROUNDS = env('BENCH_HALF_OPEN_ROUNDS', 5)
const HALF_OPEN_CAP_MS = env('BENCH_HALF_OPEN_CAP_MS', 20_000)
const LIMIT = 5
const log = (s: string) => process.stderr.write(`${s}\n`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

type Kind = 'node-redis' | 'ioredis'

interface Client {
  store: InstanceType<typeof RedisStore>
  onReady(fn: () => void): void
  ready(): Promise<void>
  close(): void
}

function open(kind: Kind, url: string): Client {
  if (kind === 'ioredis') {
    const c = new Redis(url)
    c.on('error', () => {})
    return {
      store: new RedisStore(c),
      onReady: (fn) => c.on('ready', fn),
      ready: () =>
        c.status === 'ready' ? Promise.resolve() : new Promise((r) => c.once('ready', () => r())),
      close: () => c.disconnect(),
    }
  }
  const c = createClient({ url })
  c.on('error', () => {})
  c.connect().catch(() => {})
  return {
    store: new RedisStore(c),
    onReady: (fn) => c.on('ready', fn),
    ready: () => (c.isReady ? Promise.resolve() : new Promise((r) => c.once('ready', () => r()))),
    close: () => c.destroy(),
  }
}

const limiterOn = (store: Client['store'], prefix: string) =>
  new RateLimiter({ store, prefix, limit: LIMIT, window: '1m', onStoreError: 'deny' })

/** One tick: LIMIT + 1 calls in a row on a fresh key; true when all came from Redis, LIMIT admitted. */
async function tick(
  limiter: InstanceType<typeof RateLimiter>,
  key: string,
): Promise<{ enforced: boolean; fallback: number }> {
  let admitted = 0
  let fromStore = 0
  let fallback = 0
  let lastRefused = false
  for (let i = 0; i <= LIMIT; i++) {
    const d = await limiter.consume(key)
    if (d.source === 'store') fromStore++
    if (d.source === 'fallback') fallback++
    if (d.allowed && d.source === 'store') admitted++
    lastRefused = !d.allowed
  }
  return { enforced: fromStore === LIMIT + 1 && admitted === LIMIT && lastRefused, fallback }
}

function stats(xs: number[]): string {
  if (xs.length === 0) return 'n/a'
  const s = [...xs].sort((a, b) => a - b)
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!
  return `median ${q(0.5).toFixed(0)}, min ${s[0]!.toFixed(0)}, max ${s[s.length - 1]!.toFixed(0)} (n=${s.length})`
}

async function restart(kind: Kind): Promise<{ fromAccept: number[]; fromReady: number[]; missed: number }> {
  const server = await startRedisServer()
  const client = open(kind, server.url)
  await client.ready()
  let readyAt = 0
  client.onReady(() => {
    readyAt = performance.now()
  })
  const limiter = limiterOn(client.store, `rec${Date.now()}`)
  const fromAccept: number[] = []
  const fromReady: number[] = []
  let missed = 0
  for (let round = 0; round < ROUNDS; round++) {
    let n = 0
    let stop = false
    let acceptedAt = 0
    let enforcedAt = 0
    const traffic = (async () => {
      while (!stop) {
        const t = await tick(limiter, `r${round}:t${n++}`)
        if (acceptedAt && t.enforced && !enforcedAt) {
          enforcedAt = performance.now()
          return
        }
        await sleep(10)
      }
    })()
    await sleep(300)
    await server.kill()
    await sleep(OUTAGE_MS)
    readyAt = 0
    await server.start()
    acceptedAt = performance.now()
    const deadline = acceptedAt + 10_000
    while (!enforcedAt && performance.now() < deadline) await sleep(5)
    stop = true
    await traffic
    if (!enforcedAt) {
      missed++
      log(`  ${kind} round ${round}: not enforced within 10 s`)
      continue
    }
    fromAccept.push(enforcedAt - acceptedAt)
    if (readyAt) fromReady.push(enforcedAt - readyAt)
    log(
      `  ${kind} round ${round}: enforced ${(enforcedAt - acceptedAt).toFixed(0)} ms after accept, ` +
        `${readyAt ? (enforcedAt - readyAt).toFixed(0) : '?'} ms after ready`,
    )
    await sleep(200)
  }
  client.close()
  await server.stop()
  return { fromAccept, fromReady, missed }
}

async function halfOpen(kind: Kind): Promise<{ times: number[]; fallbacks: number[]; missed: number }> {
  const times: number[] = []
  const fallbacks: number[] = []
  let missed = 0
  for (let round = 0; round < HALF_OPEN_ROUNDS; round++) {
    const server = await startRedisServer()
    const proxy = await startFaultProxy(server.port)
    const client = open(kind, proxy.url)
    await client.ready()
    const limiter = limiterOn(client.store, `half${Date.now()}`)
    await tick(limiter, 'warm')
    proxy.blackhole()
    const t0 = performance.now()
    let fallback = 0
    let enforced = false
    let n = 0
    while (performance.now() - t0 < HALF_OPEN_CAP_MS) {
      const t = await tick(limiter, `h${n++}`)
      fallback += t.fallback
      if (t.enforced) {
        enforced = true
        break
      }
      await sleep(10)
    }
    const ms = performance.now() - t0
    fallbacks.push(fallback)
    if (enforced) times.push(ms)
    else missed++
    log(
      `  ${kind} half-open round ${round}: ${enforced ? `enforced after ${ms.toFixed(0)} ms` : 'never enforced'}, ${fallback} fallback answers`,
    )
    client.close()
    await proxy.close()
    await server.stop()
  }
  return { times, fallbacks, missed }
}

async function chargedLater(kind: Kind): Promise<{ boot: number; inFlight: number }> {
  // Boot: 3 calls answered while Redis is down, then it starts.
  const port = await freePort()
  const client = open(kind, `redis://127.0.0.1:${port}`)
  const limiter = new RateLimiter({
    store: client.store,
    prefix: `boot${Date.now()}`,
    limit: LIMIT,
    window: '1m',
    onStoreError: 'deny',
    timeoutMs: 150,
  })
  await Promise.all([limiter.consume('k'), limiter.consume('k'), limiter.consume('k')])
  const server = await startRedisServer({ port })
  await client.ready()
  await sleep(1500) // past the breaker's cool-down
  const boot = LIMIT - (await limiter.peek('k')).remaining
  client.close()
  await server.stop()
  // In flight: 2 calls sent into a black hole, answered at the deadline; then the connection drops.
  const s2 = await startRedisServer()
  const proxy = await startFaultProxy(s2.port)
  const c2 = open(kind, proxy.url)
  await c2.ready()
  const l2 = new RateLimiter({
    store: c2.store,
    prefix: `fly${Date.now()}`,
    limit: LIMIT,
    window: '1m',
    onStoreError: 'deny',
    timeoutMs: 150,
    breaker: { failures: 100 },
  })
  await l2.consume('k')
  proxy.blackhole()
  await Promise.all([l2.consume('k'), l2.consume('k')])
  proxy.cut()
  await sleep(1500)
  const inFlight = LIMIT - 1 - (await l2.peek('k')).remaining
  c2.close()
  await proxy.close()
  await s2.stop()
  return { boot, inFlight }
}

const started = new Date()
const lines: string[] = []
lines.push(`# Recovery (${started.toISOString()})`)
lines.push('')
lines.push(
  `core: ${path.relative(process.cwd(), corePath)}; ${os.cpus().length} CPUs (${os.cpus()[0]?.model}), load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}; Node ${process.version}`,
)
lines.push(
  `restart: ${ROUNDS} rounds per client, outage ${OUTAGE_MS} ms; half-open: ${HALF_OPEN_ROUNDS} rounds, cap ${HALF_OPEN_CAP_MS} ms`,
)
lines.push('')
lines.push(
  '| client | restart: accept → enforced (ms) | restart: ready → enforced (ms) | half-open: black-hole → enforced (ms) | fallback answers meanwhile | charged later: boot (of 3) | charged later: in flight (of 2) |',
)
lines.push('|---|---|---|---|---|---|---|')
for (const kind of ['node-redis', 'ioredis'] as const) {
  log(`${kind}: restart`)
  const r = await restart(kind)
  log(`${kind}: half-open`)
  const h = await halfOpen(kind)
  log(`${kind}: charged later`)
  const c = await chargedLater(kind)
  lines.push(
    `| ${kind} | ${stats(r.fromAccept)}${r.missed ? `; ${r.missed} not within 10 s` : ''} | ${stats(r.fromReady)} | ` +
      `${stats(h.times)}${h.missed ? `; ${h.missed} of ${HALF_OPEN_ROUNDS} never (cap ${HALF_OPEN_CAP_MS} ms)` : ''} | ` +
      `${stats(h.fallbacks)} | ${c.boot} | ${c.inFlight} |`,
  )
}
process.stdout.write(`${lines.join('\n')}\n`)
process.exit(0)
