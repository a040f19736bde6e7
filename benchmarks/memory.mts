/**
 * Redis memory per identity (root `pnpm bench:memory`): `INFO memory` used_memory before and after
 * 10,000 client IPs make one request each, divided by 10,000, on one freshly spawned redis-server, for
 * every Tollgate algorithm (default options: limit 100 per minute, prefix 'tollgate') and, in the same run,
 * the peers with their Redis stores: express-rate-limit + rate-limit-redis, @fastify/rate-limit (through
 * a Fastify app, `inject` with one remote address per identity), rate-limiter-flexible, hono-rate-limiter.
 *
 * This counts what a key really costs: its dict entry, the key's allocation, the value (none for an
 * integer below 10,000: Redis shares those objects), the TTL's entry in the expires dict and the share of
 * both dicts' bucket arrays. `MEMORY USAGE` misses the expires entry and the buckets. Each variant starts
 * from FLUSHALL with its scripts loaded, and the reading waits for Redis to finish rehashing.
 *
 * sliding-log's cost per entry: 1,000 identities with 10 entries against 1,000 with one.
 *
 * Knobs (env): BENCH_IDENTITIES (10000), BENCH_OUT (results file; '-' = none).
 */
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import rateLimitPlugin from '@fastify/rate-limit'
import { type Algorithm, RateLimiter, RedisStore } from '@tollgate/core'
import { ALGORITHMS } from '@tollgate/core/scripts'
import Fastify from 'fastify'
import { RedisStore as HonoRedisStore } from 'hono-rate-limiter'
import { Redis } from 'ioredis'
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient } from 'redis'
import { startBenchRedis } from './lib/redis-server'
import { writeResults } from './lib/results'

const N = process.env.BENCH_IDENTITIES ? Number(process.env.BENCH_IDENTITIES) : 10_000
const log = (s: string) => process.stderr.write(`${s}\n`)
const t0 = Date.now()

const redis = await startBenchRedis()
const client = await createClient({ url: redis.url }).connect()
const io = new Redis(redis.url)

/** N distinct client IPs, 127.a.b.c, from a fixed seed (lengths vary like real addresses). */
function identities(n: number): string[] {
  const seen = new Set<string>()
  let x = 0x9e3779b9
  while (seen.size < n) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    seen.add(`127.${(x >>> 16) & 255}.${(x >>> 8) & 255}.${x & 255}`)
  }
  return [...seen]
}
const IPS = identities(N)

async function usedMemory(): Promise<number> {
  const info = await client.info('memory')
  return Number(/used_memory:(\d+)/.exec(info)![1])
}

/** used_memory once Redis has finished rehashing (the dicts grow in steps; a half-done rehash holds both tables). */
async function settled(): Promise<number> {
  let last = await usedMemory()
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 250))
    const now = await usedMemory()
    if (now === last) return now
    last = now
  }
  return last
}

async function inBatches(ids: string[], fn: (id: string) => Promise<unknown>, width = 64): Promise<void> {
  for (let i = 0; i < ids.length; i += width) await Promise.all(ids.slice(i, i + width).map(fn))
}

interface Row {
  what: string
  perIdentity: number
  sampleKey: string
  memoryUsage: number
  encoding: string
}
const rows: Row[] = []

/** Measures one variant: warm (scripts loaded, one throwaway identity), baseline, N identities, delta. */
async function measureVariant(
  what: string,
  hit: (id: string) => Promise<unknown>,
  ids = IPS,
): Promise<number> {
  await client.flushAll()
  await hit('192.0.2.1')
  await client.flushDb() // keeps the script cache: only keys are counted
  await hit('192.0.2.1')
  await client.flushDb()
  const before = await settled()
  await inBatches(ids, hit)
  const after = await settled()
  const keys = await client.keys('*')
  const sampleKey = keys.find((k) => k.includes(ids[0])) ?? keys[0]
  if (sampleKey === undefined) throw new Error(`${what}: no key left to sample`)
  const memoryUsage = Number(await client.sendCommand(['MEMORY', 'USAGE', sampleKey, 'SAMPLES', '0']))
  const encoding = `${await client.type(sampleKey)} (${await client.objectEncoding(sampleKey)})`
  const perIdentity = (after - before) / ids.length
  rows.push({ what, perIdentity, sampleKey, memoryUsage, encoding })
  log(`${what.padEnd(58)} ${perIdentity.toFixed(1).padStart(6)} B/identity  ${sampleKey}`)
  return perIdentity
}

// A store per limiter: one store refuses limiters of different policies under one prefix, and the
// default prefix keeps the sample keys as an app's would be.
const newStore = () => new RedisStore(client)
for (const algorithm of ALGORITHMS as readonly Algorithm[]) {
  // token-bucket and gcra keep a key only until the spend has refilled (60 s / 100 = 0.6 s here): an hour
  // keeps the keys alive for the reading (36 s); the window does not change a key's size.
  const tat = algorithm === 'token-bucket' || algorithm === 'gcra'
  const limiter = new RateLimiter({ store: newStore(), limit: 100, window: tat ? '1h' : '1m', algorithm })
  await measureVariant(
    `Tollgate ${algorithm}${algorithm === 'sliding-window' ? ' (default)' : ''}${tat ? ' (100 per hour)' : ''}`,
    (ip) => limiter.consume(ip),
  )
}

{
  const rlr = new RateLimitRedisStore({
    sendCommand: (...args: string[]) => client.sendCommand(args),
  })
  rlr.init({ windowMs: 60_000 } as never)
  await measureVariant('express-rate-limit + rate-limit-redis', (ip) => rlr.increment(ip))
}
{
  const app = Fastify()
  await app.register(rateLimitPlugin, { max: 100, timeWindow: 60_000, redis: io })
  app.get('/', async () => 'ok')
  await app.ready()
  await measureVariant('@fastify/rate-limit (redis store)', (ip) =>
    app.inject({ method: 'GET', url: '/', remoteAddress: ip }),
  )
  await app.close()
}
{
  const rlf = new RateLimiterRedis({ storeClient: client, useRedisPackage: true, points: 100, duration: 60 })
  await measureVariant('rate-limiter-flexible (RateLimiterRedis)', (ip) => rlf.consume(ip))
}
{
  const hono = new HonoRedisStore({
    client: {
      scriptLoad: (script: string) => client.scriptLoad(script),
      evalsha: (sha: string, keys: string[], args: string[]) =>
        client.evalSha(sha, { keys, arguments: args }),
      decr: (key: string) => client.decr(key),
      del: (key: string) => client.del(key),
    } as never,
  })
  hono.init({ windowMs: 60_000 } as never)
  await measureVariant('hono-rate-limiter (RedisStore)', (ip) => hono.increment(ip))
}

// sliding-log: cost of one more entry
let perEntry = 0
{
  const ids = IPS.slice(0, 1000)
  const limiter = new RateLimiter({ store: newStore(), limit: 100, window: '1m', algorithm: 'sliding-log' })
  const one = await measureVariant(
    '(sliding-log, 1,000 identities x 1 entry)',
    (ip) => limiter.consume(ip),
    ids,
  )
  const ten = await measureVariant(
    '(sliding-log, 1,000 identities x 10 entries)',
    async (ip) => {
      for (let i = 0; i < 10; i++) await limiter.consume(ip)
    },
    ids,
  )
  perEntry = (ten - one) / 9
  rows.splice(-2, 2)
  log(`sliding-log per extra entry: ${perEntry.toFixed(1)} B`)
}

// The floor of one key per identity: what Redis charges for a key holding a shared small integer, with and
// without a TTL, under Tollgate's name and under a one-letter prefix. No store can go below its row without
// putting several identities in one key.
await measureVariant('(floor) SET tollgate:{ip} 1 PX 60000', (ip) =>
  client.set(`tollgate:{${ip}}`, '1', { PX: 60_000 }),
)
await measureVariant('(floor) SET t:{ip} 1 PX 60000', (ip) => client.set(`t:{${ip}}`, '1', { PX: 60_000 }))
await measureVariant('(floor) SET t:{ip} 1, no TTL', (ip) => client.set(`t:{${ip}}`, '1'))

const serverVersion = /redis_version:([^\r\n]+)/.exec(await client.info('server'))![1]
await client.quit()
io.disconnect()
await redis.stop()

const best = Math.min(
  ...rows.filter((r) => !r.what.startsWith('Tollgate') && !r.what.startsWith('(')).map((r) => r.perIdentity),
)
const table = [
  '| store | bytes per identity | vs best peer | sample key | MEMORY USAGE | type (encoding) |',
  '|---|---:|---:|---|---:|---|',
  ...rows.map(
    (r) =>
      `| ${r.what} | ${r.perIdentity.toFixed(1)} | ${(r.perIdentity / best).toFixed(2)}x | \`${r.sampleKey}\` | ${r.memoryUsage} | ${r.encoding} |`,
  ),
].join('\n')
const date = new Date().toISOString().slice(0, 10)
const report = `## Redis memory per identity (${date})

Machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version},
redis-server ${serverVersion} (spawned for this run, no persistence, maxmemory-policy noeviction).
Command: \`pnpm bench:memory\` (BENCH_IDENTITIES=${N}); ${((Date.now() - t0) / 1000).toFixed(0)} s.

${N.toLocaleString('en-US')} client IPs (127.a.b.c), one request each, limit 100 per minute; \`INFO memory\`
used_memory after minus before (scripts already loaded, rehashing finished), divided by ${N.toLocaleString('en-US')}.

${table}

"(floor)" rows are not limiters: a plain \`SET\` of a small integer (an object Redis shares) per identity, with
and without a TTL, under Tollgate's key name and under a one-letter prefix: what Redis charges for one key
per identity (the key's dict entry, its name, its expires entry and both dicts' buckets) before any state.
sliding-log: each entry past the first costs ${perEntry.toFixed(1)} B (1,000 identities, 10 entries against 1).
\`MEMORY USAGE\` leaves out the TTL's entry in the expires dict and both dicts' buckets: used_memory is what
the server pays.
`
process.stdout.write(`\n${report}`)
const out =
  process.env.BENCH_OUT ??
  path.join(path.dirname(fileURLToPath(import.meta.url)), 'results', `memory-${date}.md`)
if (out !== '-') {
  writeResults(out, report, 'memory')
  log(`\nwritten to ${path.relative(process.cwd(), out)}`)
}
