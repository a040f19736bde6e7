/**
 * What `storage: 'compact'` costs Redis against a key each, at scale: for the fixed and the sliding
 * window, with a key each and compact, N client IPs (10,000, 100,000, 1,000,000) make one call each, then
 * a second; Redis CPU per decision (INFO cpu over each drive) and the growth of `used_memory` per identity.
 * Two ways of sending: batched (RedisStore's default: calls queued while one is in flight go as one
 * batch script) and lone (`batch: false`: every call its own script, as most HTTP traffic arrives), 256 calls
 * in flight through node-redis either way. rate-limiter-flexible (its own script, node-redis) runs in the
 * same drives as the reference.
 *
 * A key each and compact of one algorithm and way of sending run side by side (their drives in turn),
 * so their ratio is taken within one stretch of the shared machine's time.
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
// long enough for two variants' drives of a million identities, lone, inside one window
const WINDOW_MS = 3_600_000
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
  const limiter = new RateLimiter({ store, prefix, limit: 100, window: '1h', algorithm })
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
  duration: 3600,
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
  /** Compact's second-call CPU over its key-each twin's, the median of the rounds' own ratios. */
  readonly vsKeys?: number
}
const rows: Row[] = []

/**
 * The variants measured side by side: each algorithm and way of sending with a key each and compact, the
 * peer alone. A group's drives alternate (first calls in turn, then round after round each variant's
 * later calls), so a drift of the shared machine reaches both sides of a ratio alike.
 */
const groups: Variant[][] = []
for (const v of chosen) {
  const twin = v.what.replace('compact', 'a key each')
  const g = v.what.includes('compact') ? groups.find((x) => x.some((y) => y.what === twin)) : undefined
  if (g) g.push(v)
  else groups.push([v])
}

for (const n of SCALES) {
  const ids = ALL_IPS.slice(0, n)
  for (const group of groups) {
    let measured: Row[] | undefined
    // every drive inside one window (a later call in the next finds nothing to count): a group that
    // crossed a window's end is measured again
    for (let attempt = 0; measured === undefined; attempt++) {
      // scripts loaded and the compact prefix's first check done, then an empty keyspace
      await client.flushAll()
      for (const v of group) await v.hit('192.0.2.1')
      await client.flushDb()
      const left = WINDOW_MS - (Date.now() % WINDOW_MS)
      const needs = (n * group.length * (1 + ROUNDS)) / 40
      if (attempt > 0 || left < Math.max(20_000, needs)) await sleep(left + 100)
      const window = Math.floor(Date.now() / WINDOW_MS)
      const first: { firstUs: number; perIdentity: number }[] = []
      for (const v of group) {
        const before = await settled()
        const cpu = await cpuUs()
        await pool(ids, v.hit, 256)
        const firstUs = ((await cpuUs()) - cpu) / n
        first.push({ firstUs, perIdentity: ((await settled()) - before) / n })
      }
      // later calls: ROUNDS drives of each variant in turn (each identity's state found; the limit far off)
      const drives: number[][] = group.map(() => [])
      const scripts = group.map(() => 0)
      for (let r = 0; r < ROUNDS; r++) {
        for (let i = 0; i < group.length; i++) {
          const ran = await scriptsRun(client)
          const cpu = await cpuUs()
          await pool(ids, group[i]!.hit, 256)
          drives[i]!.push(((await cpuUs()) - cpu) / n)
          scripts[i]! += (await scriptsRun(client)) - ran
        }
      }
      const crossed = Math.floor(Date.now() / WINDOW_MS) !== window
      if (crossed && attempt < 2) {
        log(`${group.map((v) => v.what).join(' / ')} x ${n}: crossed a window's end, again`)
        continue
      }
      measured = group.map((v, i) => ({
        what: crossed ? `${v.what} (crossed a window)` : v.what,
        n,
        ...first[i]!,
        secondUs: median(drives[i]!),
        perScript: (ROUNDS * n) / scripts[i]!,
        ...(i > 0 ? { vsKeys: median(drives[i]!.map((d, r) => d / drives[0]![r]!)) } : {}),
      }))
    }
    for (const row of measured) {
      rows.push(row)
      log(
        `${row.what.padEnd(40)} ${String(n).padStart(8)}  ${row.perIdentity.toFixed(1).padStart(6)} B  ` +
          `${row.firstUs.toFixed(2)} / ${row.secondUs.toFixed(2)} µs, ${row.perScript.toFixed(1)} per script` +
          (row.vsKeys === undefined ? '' : `, ${row.vsKeys.toFixed(2)}x a key each`),
      )
    }
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
      ? `${ratio(r, base, (x) => x.firstUs)}, ${r.vsKeys === undefined ? '—' : `${r.vsKeys.toFixed(2)}x`}`
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

A key each and compact of one algorithm and way of sending run side by side from FLUSHALL: N client IPs make one call each
through each (first call), then ${ROUNDS} rounds of one more call each, through each in turn (second call: the median of the
${ROUNDS} drives; compact / a key each: the median of the rounds' own ratios); the peer runs alone. 256 calls in flight on one
node-redis client, limit 100 per hour; Redis CPU is INFO cpu (user + sys) over each drive divided by N, memory the growth of
used_memory over the first drive, divided by N; decisions per script: the second calls over the EVALSHA and EVAL calls they made
(a batch's size). "batched": RedisStore's default; "lone": \`batch: false\`.

${table}
`
process.stdout.write(report)
const out = reportPath('compact-cost')
if (out !== '-') writeResults(out, report, 'compact-cost')
