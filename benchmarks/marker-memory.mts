/**
 * Redis memory per settled call (root `pnpm bench:markers`): each of N identities (IPv4 addresses, prefix
 * `tollgate`) makes one call of cost 1 under a 1-day policy (limit 100) and settles it, which leaves the
 * spend's refund-once marker. For each
 * algorithm, on one freshly spawned redis-server: `INFO memory` used_memory after the settlements minus
 * before them (the counters already written, rehashing finished), over N; `MEMORY USAGE` of one marker
 * (which misses its expires entry and its share of the dicts' buckets); and how long a marker lives
 * (PTTL of the first, right after the run).
 *
 * Knobs (env): BENCH_IDENTITIES (10000).
 */
import { type Algorithm, RateLimiter, RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { settledMemory } from './lib/drive'
import { startBenchRedis } from './lib/redis-server'

const N = process.env.BENCH_IDENTITIES ? Number(process.env.BENCH_IDENTITIES) : 10_000
const ALGORITHMS: Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra']
const IN_FLIGHT = 256

const server = await startBenchRedis()
const client = createClient({ url: `redis://127.0.0.1:${server.port}` })
client.on('error', () => {})
await client.connect()

const steady = () => settledMemory(client)

/** Runs `fn` for 0..N-1, IN_FLIGHT at a time. */
async function each<T>(fn: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(N)
  let next = 0
  const worker = async () => {
    while (next < N) {
      const i = next++
      out[i] = await fn(i)
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  return out
}

const rows: string[] = []
try {
  for (const algorithm of ALGORITHMS) {
    await client.flushAll()
    // a client of its own per algorithm: stores over one client count as one store, which refuses two
    // limiters with different policies under one prefix
    const own = await client.duplicate().connect()
    const limiter = new RateLimiter({
      store: new RedisStore(own),
      prefix: 'tollgate',
      limit: 100,
      window: '1d',
      algorithm,
    })
    const decisions = await each((i) => limiter.consume(`10.0.${i >> 8}.${i & 255}`))
    const before = await steady()
    await each((i) => limiter.settle(decisions[i]!, 1))
    const after = await steady()
    const marker = (await client.keys('*!*'))[0]!
    const usage = Number(await client.memoryUsage(marker))
    const hours = (await client.pTTL(marker)) / 3_600_000
    rows.push(`| ${algorithm} | ${((after - before) / N).toFixed(0)} | ${usage} | ${hours.toFixed(1)} h |`)
    await own.quit()
  }
} finally {
  await client.quit()
  await server.stop()
}
console.log(
  `Memory per settled call, ${N.toLocaleString('en-US')} identities, one call each, limit 100 per 1d:\n`,
)
console.log('| algorithm | used_memory delta / call (B) | MEMORY USAGE of a marker (B) | marker lives |')
console.log('| --- | --- | --- | --- |')
for (const row of rows) console.log(row)
