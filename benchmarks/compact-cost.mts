/**
 * What `storage: 'compact'` costs Redis against a key each, at scale: for the fixed and the sliding
 * window, with a key each and compact, N client IPs (10,000, 100,000, 1,000,000) make one call each, then
 * a second; Redis CPU per decision (INFO cpu over each drive) and the growth of `used_memory` per identity.
 * Two ways of sending: batched (RedisStore's default: calls queued while one is in flight go as one
 * batch script) and lone (`batch: false`: every call its own script, as most HTTP traffic arrives), 256 calls
 * in flight through node-redis either way. rate-limiter-flexible (its own script, node-redis) runs in the
 * same drives as the reference.
 *
 * `node --import tsx benchmarks/compact-cost.mts` (after `pnpm build`); knobs (env): BENCH_SCALES
 * (10000,100000,1000000), BENCH_VARIANTS (a comma list of substrings: only the variants whose name holds
 * one), BENCH_ROUNDS (second-call drives per variant, median; 3), BENCH_OUT (results file; default
 * benchmarks/results/compact-cost-<date>.md; '-' = none).
 * @module
 */
import os from 'node:os'
import { type Algorithm, RateLimiter, RedisStore, type RedisStoreOptions } from '@tollgate/core'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient } from 'redis'
import { type Hit, identities, pool, scriptsRun, settledMemory } from './lib/drive'
import { median } from './lib/measure'
import { redisCpuUs } from './lib/redis-cpu'
import { startBenchRedis } from './lib/redis-server'
import { reportPath, writeResults } from './lib/results'

const SCALES = (process.env.BENCH_SCALES ?? '10000,100000,1000000').split(',').map(Number)
const ONLY = process.env.BENCH_VARIANTS?.split(',').filter(Boolean)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
// long enough for a million identities' drives, lone, inside one window
const WINDOW_MS = 300_000
const SECRET = 'bench-compact-cost-secret'
const log = (s: string) => process.stderr.write(`${s}\n`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const t0 = Date.now()

const redis = await startBenchRedis()
const client = await createClient({ url: redis.url }).connect()

const ALL_IPS = identities(Math.max(...SCALES))

const settled = () => settledMemory(client)
const cpuUs = () => redisCpuUs(client)

interface Variant {
  readonly what: string
  readonly hit: Hit
}

let variantsMade = 0
function tollgate(algorithm: Algorithm, storage: RedisStoreOptions['storage'], lone: boolean): Variant {
  const options: RedisStoreOptions = storage === 'compact' ? { storage, secret: SECRET } : { storage }
  const store = new RedisStore(client, lone ? { ...options, batch: false } : options)
  // one client under every store: each limiter a prefix of its own, all of one length
  const prefix = `t${variantsMade++}`
  const limiter = new RateLimiter({ store, prefix, limit: 100, window: '5m', algorithm })
  return {
    what: `${algorithm}, ${storage === 'compact' ? 'compact' : 'a key each'}, ${lone ? 'lone' : 'batched'}`,
    hit: (ip) => limiter.consume(ip),
  }
}

const variants: Variant[] = [false, true].flatMap((lone) => [
  ...(['fixed-window', 'sliding-window'] as const).flatMap((a) => [
    tollgate(a, 'keys', lone),
    tollgate(a, 'compact', lone),
  ]),
])
const flexible = new RateLimiterRedis({
  storeClient: client,
  useRedisPackage: true,
  points: 100,
  duration: 300,
})
variants.push({ what: 'rate-limiter-flexible', hit: (ip) => flexible.consume(ip) })
const chosen = ONLY ? variants.filter((v) => ONLY.some((s) => v.what.includes(s))) : variants

interface Row {
  readonly what: string
  readonly n: number
  readonly perIdentity: number
  readonly firstUs: number
  readonly secondUs: number
  readonly perScript: number
}
const rows: Row[] = []

for (const n of SCALES) {
  const ids = ALL_IPS.slice(0, n)
  for (const v of chosen) {
    let row: Row | undefined
    // both drives inside one window (a second call in the next finds nothing to count): a reading
    // that crossed a window's end is taken again
    for (let attempt = 0; row === undefined; attempt++) {
      // scripts loaded and the compact prefix's first check done, then an empty keyspace
      await client.flushAll()
      await v.hit('192.0.2.1')
      await client.flushDb()
      const left = WINDOW_MS - (Date.now() % WINDOW_MS)
      if (attempt > 0 || left < Math.max(20_000, (n * (1 + ROUNDS)) / 40)) await sleep(left + 100)
      const window = Math.floor(Date.now() / WINDOW_MS)
      const before = await settled()
      let cpu = await cpuUs()
      await pool(ids, v.hit, 256)
      const firstUs = ((await cpuUs()) - cpu) / n
      const perIdentity = ((await settled()) - before) / n
      // later calls: the median of ROUNDS drives (each identity's state found; the limit stays far off)
      const drives: number[] = []
      const scripts = await scriptsRun(client)
      for (let r = 0; r < ROUNDS; r++) {
        cpu = await cpuUs()
        await pool(ids, v.hit, 256)
        drives.push(((await cpuUs()) - cpu) / n)
      }
      const secondUs = median(drives)
      const perScript = (ROUNDS * n) / ((await scriptsRun(client)) - scripts)
      const crossed = Math.floor(Date.now() / WINDOW_MS) !== window
      if (!crossed || attempt === 2)
        row = {
          what: crossed ? `${v.what} (crossed a window)` : v.what,
          n,
          perIdentity,
          firstUs,
          secondUs,
          perScript,
        }
      else log(`${v.what} x ${n}: crossed a window's end, again`)
    }
    const { perIdentity, firstUs, secondUs, perScript } = row
    rows.push(row)
    log(
      `${v.what.padEnd(40)} ${String(n).padStart(8)}  ${perIdentity.toFixed(1).padStart(6)} B  ` +
        `${firstUs.toFixed(2)} / ${secondUs.toFixed(2)} µs, ${perScript.toFixed(1)} per script`,
    )
  }
}
const serverVersion = /redis_version:([^\r\n]+)/.exec(await client.info('server'))![1]
await client.quit()
await redis.stop()

const count = (n: number) => n.toLocaleString('en-US')
const find = (what: string, n: number) => rows.find((r) => r.what === what && r.n === n)
const ratio = (r: Row | undefined, base: Row | undefined, f: (x: Row) => number) =>
  r && base ? `${(f(r) / f(base)).toFixed(2)}x` : '—'
const table = [
  '| variant | identities | bytes per identity | Redis µs per decision, first call | second call | compact / a key each (first, second) | decisions per script, second call |',
  '|---|---:|---:|---:|---:|---:|---:|',
  ...rows.map((r) => {
    const base = r.what.includes('compact') ? find(r.what.replace('compact', 'a key each'), r.n) : undefined
    const vs = base
      ? `${ratio(r, base, (x) => x.firstUs)}, ${ratio(r, base, (x) => x.secondUs)}`
      : r.what.includes('a key each')
        ? '(base)'
        : '—'
    return `| ${r.what} | ${count(r.n)} | ${r.perIdentity.toFixed(1)} | ${r.firstUs.toFixed(2)} | ${r.secondUs.toFixed(2)} | ${vs} | ${r.perScript.toFixed(1)} |`
  }),
].join('\n')
const cpus = os.cpus()
const report = `## Compact cost at scale, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC

Command: \`node --import tsx benchmarks/compact-cost.mts\` (BENCH_SCALES=${SCALES.join(',')}${ONLY ? `, BENCH_VARIANTS=${ONLY.join(',')}` : ''}); ${((Date.now() - t0) / 1000).toFixed(0)} s.
Machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, Node ${process.version}, Redis ${serverVersion} (spawned, no persistence).

Each variant from FLUSHALL: N client IPs make one call each (first call), then ${ROUNDS} more each (second call: the median of
${ROUNDS} drives), 256 in flight on one node-redis client, limit 100 per 5 minutes; Redis CPU is INFO cpu (user + sys) over each drive
divided by N, memory the growth of used_memory after the first drive, divided by N; decisions per script: the second calls over the
EVALSHA and EVAL calls they made (a batch's size). "batched": RedisStore's default; "lone": \`batch: false\`.

${table}
`
process.stdout.write(report)
const out = reportPath('compact-cost')
if (out !== '-') writeResults(out, report, 'compact-cost')
