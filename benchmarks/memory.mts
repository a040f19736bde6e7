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
 * from FLUSHALL with its scripts loaded, and the reading waits for Redis to finish rehashing (used_memory
 * steady and `DEBUG HTSTATS` showing no rehashing target: during a rehash used_memory holds still with
 * both tables allocated).
 *
 * sliding-log's cost per entry: 1,000 identities with 10 entries against 1,000 with one.
 *
 * The scale table: the same reading at each of BENCH_SCALES identities (the first N of one deterministic
 * list), same server, each variant from FLUSHALL, one call per identity with 256 in flight, for Tollgate
 * fixed-window and sliding-window with `storage: 'keys'` (the default) and `storage: 'compact'` (fields of
 * 2,048 hashes per policy), all through `RateLimiter.consume` on node-redis, and the peers as above, except
 * rate-limiter-flexible on ioredis. It adds Redis CPU per decision (`INFO cpu` used_cpu_sys + used_cpu_user
 * over the drive, over N; then over a second drive of the same identities, each one's second call, which
 * finds its state instead of creating it) and the first drive's decisions per second (for information: client and server share
 * the machine). For the compact variants it counts the bucket hashes (SCAN `tollgate:{~h:c*`) by level (a
 * bucket's first level, `!2`, `!3`) and by `OBJECT ENCODING`, and the fields each level holds (HLEN); the
 * flood row is that count for the largest scale of compact sliding-window: 1,000,000 identities put ~488 in
 * each bucket, near the 512 its first two levels hold. Fixed-window counters expire at the minute's end,
 * so a drive that might not finish before it waits for the next minute (a row that still crossed one is
 * marked). A variant whose last scale predicts a drive over 60 s is not measured at the next (in practice
 * @fastify/rate-limit through `inject` at 1,000,000); the report says which. The scale chart (bytes per
 * identity, a panel per scale) is docs/images/memory-scale.svg for a run written to benchmarks/results/,
 * else beside the report as `<report>-scale.svg`.
 *
 * Knobs (env): BENCH_IDENTITIES (10000), BENCH_SCALES (10000,100000,1000000), BENCH_OUT (results file;
 * '-' = none), BENCH_CHART (lib/results; '-' also skips the scale chart).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import rateLimitPlugin from '@fastify/rate-limit'
import {
  type Algorithm,
  type PolicyOptions,
  RateLimiter,
  RedisStore,
  type RedisStoreOptions,
} from '@tollgate/core'
import { ALGORITHMS } from '@tollgate/core/scripts'
import Fastify from 'fastify'
import { RedisStore as HonoRedisStore } from 'hono-rate-limiter'
import { Redis } from 'ioredis'
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient } from 'redis'
import { memoryScaleChart, renderSvg } from './lib/chart'
import { type Hit, identities, pool, settledMemory } from './lib/drive'
import { startBenchRedis } from './lib/redis-server'
import { IMAGES_DIR, parseReport, RESULTS_DIR, reportPath, writeResults } from './lib/results'

const N = process.env.BENCH_IDENTITIES ? Number(process.env.BENCH_IDENTITIES) : 10_000
const SCALES = (process.env.BENCH_SCALES ?? '10000,100000,1000000').split(',').map(Number)
const WINDOW_MS = 60_000
/** A drive predicted to take longer is not run: it would outlast the window its first counters live in. */
const MAX_DRIVE_S = 60
const SECRET = 'bench-memory-compact-secret'
const log = (s: string) => process.stderr.write(`${s}\n`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const t0 = Date.now()

const redis = await startBenchRedis()
const client = await createClient({ url: redis.url }).connect()
const io = new Redis(redis.url)

const ALL_IPS = identities(Math.max(N, ...SCALES))
const IPS = ALL_IPS.slice(0, N)

const settled = () => settledMemory(client)

/** Redis' own CPU time so far, in seconds (user + system, main thread and the rest). */
async function redisCpu(): Promise<number> {
  const info = await client.info('cpu')
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)![1])
  return field('used_cpu_sys') + field('used_cpu_user')
}

/** An empty keyspace with the variant's scripts loaded (and anything else its first call sets up). */
async function fresh(hit: Hit): Promise<void> {
  await client.flushAll()
  await hit('192.0.2.1')
  await client.flushDb() // keeps the script cache: only keys are counted
  await hit('192.0.2.1')
  await client.flushDb()
}

/** The clients of the Tollgate variants' stores, closed at the end. */
const owned: { quit(): Promise<unknown> }[] = []

/** A Tollgate limiter at default options (100 per minute) on a store of its own: one store refuses two
 * limiters with different policies under one prefix, and each variant measures the default prefix. */
function tollgate(
  algorithm: Algorithm,
  window: PolicyOptions['window'] = '1m',
  storage: RedisStoreOptions['storage'] = 'keys',
): Hit {
  // a client of its own: every store over one client counts as one store, which refuses two limiters
  // with different policies under one prefix, and each variant measures the default prefix
  const own = client.duplicate()
  owned.push(own)
  void own.connect()
  const store = new RedisStore(own, storage === 'compact' ? { storage, secret: SECRET } : {})
  const limiter = new RateLimiter({ store, limit: 100, window, algorithm })
  return (ip) => limiter.consume(ip)
}

function rateLimitRedis(): Hit {
  const rlr = new RateLimitRedisStore({
    sendCommand: (...args: string[]) => client.sendCommand(args),
  })
  rlr.init({ windowMs: WINDOW_MS } as never)
  return (ip) => rlr.increment(ip)
}

async function fastifyApp(): Promise<{ hit: Hit; close: () => Promise<void> }> {
  const app = Fastify()
  await app.register(rateLimitPlugin, { max: 100, timeWindow: WINDOW_MS, redis: io })
  app.get('/', async () => 'ok')
  await app.ready()
  return { hit: (ip) => app.inject({ method: 'GET', url: '/', remoteAddress: ip }), close: () => app.close() }
}

function flexible(on: 'node-redis' | 'ioredis'): Hit {
  const rlf = new RateLimiterRedis(
    on === 'ioredis'
      ? { storeClient: io, points: 100, duration: 60 }
      : { storeClient: client, useRedisPackage: true, points: 100, duration: 60 },
  )
  return (ip) => rlf.consume(ip)
}

function honoRedisStore(): Hit {
  const hono = new HonoRedisStore({
    client: {
      scriptLoad: (script: string) => client.scriptLoad(script),
      evalsha: (sha: string, keys: string[], args: string[]) =>
        client.evalSha(sha, { keys, arguments: args }),
      decr: (key: string) => client.decr(key),
      del: (key: string) => client.del(key),
    } as never,
  })
  hono.init({ windowMs: WINDOW_MS } as never)
  return (ip) => hono.increment(ip)
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
async function measureVariant(what: string, hit: Hit, ids = IPS): Promise<number> {
  await fresh(hit)
  const before = await settled()
  await pool(ids, hit, 64)
  const after = await settled()
  const keys = await client.keys('*')
  const sampleKey = keys.find((k) => k.includes(ids[0]!)) ?? keys[0]
  if (sampleKey === undefined) throw new Error(`${what}: no key left to sample`)
  const memoryUsage = Number(await client.sendCommand(['MEMORY', 'USAGE', sampleKey, 'SAMPLES', '0']))
  const encoding = `${await client.type(sampleKey)} (${await client.objectEncoding(sampleKey)})`
  const perIdentity = (after - before) / ids.length
  rows.push({ what, perIdentity, sampleKey, memoryUsage, encoding })
  log(`${what.padEnd(58)} ${perIdentity.toFixed(1).padStart(6)} B/identity  ${sampleKey}`)
  return perIdentity
}

for (const algorithm of ALGORITHMS as readonly Algorithm[]) {
  // token-bucket and gcra keep a key only until the spend has refilled (60 s / 100 = 0.6 s here): an hour
  // keeps the keys alive for the reading (36 s); the window does not change a key's size.
  const tat = algorithm === 'token-bucket' || algorithm === 'gcra'
  await measureVariant(
    `Tollgate ${algorithm}${algorithm === 'sliding-window' ? ' (default)' : ''}${tat ? ' (100 per hour)' : ''}`,
    tollgate(algorithm, tat ? '1h' : '1m'),
  )
}

await measureVariant('express-rate-limit + rate-limit-redis', rateLimitRedis())
const fastify = await fastifyApp()
await measureVariant('@fastify/rate-limit (redis store)', fastify.hit)
await measureVariant('rate-limiter-flexible (RateLimiterRedis)', flexible('node-redis'))
await measureVariant('hono-rate-limiter (RedisStore)', honoRedisStore())

// sliding-log: cost of one more entry
let perEntry = 0
{
  const ids = IPS.slice(0, 1000)
  const consume = tollgate('sliding-log')
  const one = await measureVariant('(sliding-log, 1,000 identities x 1 entry)', consume, ids)
  const ten = await measureVariant(
    '(sliding-log, 1,000 identities x 10 entries)',
    async (ip) => {
      for (let i = 0; i < 10; i++) await consume(ip)
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

// ---- scale: 10k, 100k, 1M identities ----

interface ScaleVariant {
  what: string
  hit: Hit
  /** Tollgate `storage: 'compact'`: its bucket hashes are counted by level and encoding. */
  compact?: boolean
  /** A peer, for the compact / peer ratios. */
  peer?: boolean
}

/** The compact buckets' hashes, per level (index 0 = a bucket's first level, 1 = `!2`, 2 = `!3`). */
interface Levels {
  keys: number[]
  /** HLEN summed: one field per identity. */
  fields: number[]
  /** Keys whose OBJECT ENCODING is not listpack. */
  hashtable: number[]
}

interface ScaleRow {
  what: string
  n: number
  perIdentity: number
  cpuUs: number
  /** Redis µs per decision of a second drive over the same identities (each one's second call). */
  againUs: number
  rate: number
  /** The reading came after the end of the minute the drive began in. */
  crossed: boolean
  levels?: Levels
}

async function compactLevels(): Promise<Levels> {
  const keys = new Set<string>() // SCAN may return a key twice
  for await (const batch of client.scanIterator({ MATCH: 'tollgate:{~h:c*', COUNT: 1000 }))
    for (const key of batch) keys.add(key)
  const levels: Levels = { keys: [0, 0, 0], fields: [0, 0, 0], hashtable: [0, 0, 0] }
  await Promise.all(
    [...keys].map(async (key) => {
      const j = key.endsWith('!3') ? 2 : key.endsWith('!2') ? 1 : 0
      const [fields, encoding] = await Promise.all([client.hLen(key), client.objectEncoding(key)])
      levels.keys[j]!++
      levels.fields[j]! += fields
      if (encoding !== 'listpack') levels.hashtable[j]!++
    }),
  )
  return levels
}

/** Waits for the next minute when less than `seconds` is left of this one. */
async function roomInWindow(seconds: number): Promise<void> {
  const left = WINDOW_MS - (Date.now() % WINDOW_MS)
  if (left < seconds * 1000) await sleep(left + 100)
}

/** One variant at n identities: from FLUSHALL, baseline, the drive (256 in flight), settled reading. */
async function measureScale(v: ScaleVariant, n: number, expectedS: number): Promise<ScaleRow> {
  const ids = ALL_IPS.slice(0, n)
  await fresh(v.hit)
  await roomInWindow(2 * expectedS + 10) // two drives, the settling and the level count
  const before = await settled()
  const cpu = await redisCpu()
  const start = Date.now()
  await pool(ids, v.hit, 256)
  const seconds = (Date.now() - start) / 1000
  const cpuUs = ((await redisCpu()) - cpu) * 1e6
  const after = await settled()
  const again = await redisCpu()
  await pool(ids, v.hit, 256)
  const againUs = ((await redisCpu()) - again) * 1e6
  const crossed = Math.floor(Date.now() / WINDOW_MS) !== Math.floor(start / WINDOW_MS)
  const row: ScaleRow = {
    what: v.what,
    n,
    perIdentity: (after - before) / n,
    cpuUs: cpuUs / n,
    againUs: againUs / n,
    rate: n / seconds,
    crossed,
    levels: v.compact ? await compactLevels() : undefined,
  }
  log(
    `${`${v.what} x ${n}`.padEnd(58)} ${row.perIdentity.toFixed(1).padStart(6)} B/identity ` +
      `${row.cpuUs.toFixed(2).padStart(6)} µs/decision (again ${row.againUs.toFixed(2)}) ${Math.round(row.rate).toString().padStart(7)}/s` +
      `${crossed ? '  (crossed a window)' : ''}`,
  )
  return row
}

const scaleVariants: ScaleVariant[] = [
  { what: 'Tollgate fixed-window', hit: tollgate('fixed-window') },
  { what: 'Tollgate sliding-window', hit: tollgate('sliding-window') },
  { what: 'Tollgate fixed-window, compact', hit: tollgate('fixed-window', '1m', 'compact'), compact: true },
  {
    what: 'Tollgate sliding-window, compact',
    hit: tollgate('sliding-window', '1m', 'compact'),
    compact: true,
  },
  { what: 'express-rate-limit + rate-limit-redis', hit: rateLimitRedis(), peer: true },
  { what: '@fastify/rate-limit (inject)', hit: fastify.hit, peer: true },
  { what: 'rate-limiter-flexible (ioredis)', hit: flexible('ioredis'), peer: true },
  { what: 'hono-rate-limiter (RedisStore)', hit: honoRedisStore(), peer: true },
]
const scaleRows: ScaleRow[] = []
/** Variants left out at a scale: what their previous scale predicted. */
const skipped: string[] = []
/** Each variant's decisions per second at its last scale, to predict the next drive's length. */
const lastRate = new Map<string, number>()
for (const n of SCALES) {
  for (const v of scaleVariants) {
    const expectedS = n / (lastRate.get(v.what) ?? 5_000)
    if (expectedS > MAX_DRIVE_S) {
      skipped.push(`${v.what} at ${n.toLocaleString('en-US')} (predicted drive ${expectedS.toFixed(0)} s)`)
      log(`${v.what} x ${n}: skipped, predicted drive ${expectedS.toFixed(0)} s`)
      continue
    }
    const row = await measureScale(v, n, expectedS)
    lastRate.set(v.what, row.rate)
    scaleRows.push(row)
  }
}
await fastify.close()

const serverVersion = /redis_version:([^\r\n]+)/.exec(await client.info('server'))![1]
await client.quit()
await Promise.all(owned.map((c) => c.quit()))
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

const count = (n: number) => n.toLocaleString('en-US')
const percent = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1)}%`
const scaleRow = (what: string, n: number) => scaleRows.find((r) => r.what === what && r.n === n)

const scaleTable = [
  '| variant | identities | bytes per identity | Redis µs per decision | the same, second call | decisions/s |',
  '|---|---:|---:|---:|---:|---:|',
  ...scaleRows.map(
    (r) =>
      `| ${r.what}${r.crossed ? ' (crossed a window)' : ''} | ${count(r.n)} | ${r.perIdentity.toFixed(1)} | ${r.cpuUs.toFixed(2)} | ${r.againUs.toFixed(2)} | ${count(Math.round(r.rate))} |`,
  ),
].join('\n')

const compactRows = scaleRows.filter((r) => r.levels)
const levelTable = [
  '| compact variant | identities | level-1 keys | `!2` keys | `!3` keys | listpack keys | hashtable keys | fields in levels 1 / 2 / 3 |',
  '|---|---:|---:|---:|---:|---:|---:|---|',
  ...compactRows.map((r) => {
    const l = r.levels!
    const keys = l.keys.reduce((a, b) => a + b)
    const hashtable = l.hashtable.reduce((a, b) => a + b)
    return `| ${r.what} | ${count(r.n)} | ${count(l.keys[0]!)} | ${count(l.keys[1]!)} | ${count(l.keys[2]!)} | ${count(keys - hashtable)} | ${count(hashtable)} | ${l.fields.map(count).join(' / ')} |`
  }),
].join('\n')

const floodN = Math.max(...SCALES)
const flood = scaleRow('Tollgate sliding-window, compact', floodN)
const floodTable = (() => {
  if (!flood?.levels) return `(no compact sliding-window row at ${count(floodN)})`
  const { fields, hashtable } = flood.levels
  const total = fields.reduce((a, b) => a + b)
  return [
    '| identities | fields counted | in level 1 | in level 2 | in level 3 | level-1/2 keys out of listpack |',
    '|---:|---:|---:|---:|---:|---:|',
    `| ${count(floodN)} | ${count(total)} | ${percent(fields[0]!, total)} | ${percent(fields[1]!, total)} | ${percent(fields[2]!, total)} | ${hashtable[0]! + hashtable[1]!} |`,
  ].join('\n')
})()

const compactAlgorithms = ['fixed-window', 'sliding-window']
const peers = scaleVariants.filter((v) => v.peer).map((v) => v.what)
const ratioTable = [
  `| peer | ${compactAlgorithms.flatMap((a) => SCALES.map((n) => `compact ${a} / peer at ${count(n)}`)).join(' | ')} |`,
  `|---|${compactAlgorithms.flatMap(() => SCALES.map(() => '---:')).join('|')}|`,
  ...peers.map((peer) => {
    const cells = compactAlgorithms.flatMap((a) =>
      SCALES.map((n) => {
        const tg = scaleRow(`Tollgate ${a}, compact`, n)
        const other = scaleRow(peer, n)
        return tg && other ? `${(tg.perIdentity / other.perIdentity).toFixed(2)}x` : '—'
      }),
    )
    return `| ${peer} | ${cells.join(' | ')} |`
  }),
].join('\n')

const date = new Date().toISOString().slice(0, 10)
const machine = `${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`
const report = `## Redis memory per identity (${date})

Machine: ${machine},
redis-server ${serverVersion} (spawned for this run, no persistence, maxmemory-policy noeviction).
Command: \`pnpm bench:memory\` (BENCH_IDENTITIES=${N}, BENCH_SCALES=${SCALES.join(',')}); ${((Date.now() - t0) / 1000).toFixed(0)} s.

${N.toLocaleString('en-US')} client IPs (127.a.b.c), one request each, limit 100 per minute; \`INFO memory\`
used_memory after minus before (scripts already loaded, rehashing finished), divided by ${N.toLocaleString('en-US')}.

${table}

"(floor)" rows are not limiters: a plain \`SET\` of a small integer (an object Redis shares) per identity, with
and without a TTL, under Tollgate's key name and under a one-letter prefix: what Redis charges for one key
per identity (the key's dict entry, its name, its expires entry and both dicts' buckets) before any state.
sliding-log: each entry past the first costs ${perEntry.toFixed(1)} B (1,000 identities, 10 entries against 1).
\`MEMORY USAGE\` leaves out the TTL's entry in the expires dict and both dicts' buckets: used_memory is what
the server pays.

### Scale: memory and Redis CPU per identity

${SCALES.map(count).join(', ')} client IPs (the first N of the same list), one call each, 256 in flight, each
variant from FLUSHALL on the same server. Tollgate through \`RateLimiter.consume\` (node-redis), \`storage:
'keys'\` (the default) or \`'compact'\`; the peers through their store APIs as above (rate-limiter-flexible on
ioredis), @fastify/rate-limit through \`inject\`. Redis µs per decision: \`INFO cpu\` used_cpu_sys +
used_cpu_user over the drive, over N; "second call": over a second drive of the same N identities, each
one's state found, not created. decisions/s: the drive's, client and server on the same machine (for
information).

${scaleTable}

${skipped.length ? `Not measured: ${skipped.join('; ')}.` : 'Every variant measured at every scale.'}

### Compact buckets by level and encoding

SCAN \`tollgate:{~h:c*\` after the drive: a bucket's first level, its \`!2\` and \`!3\` levels, each key's
\`OBJECT ENCODING\`, and the fields (HLEN, one per identity) each level holds.

${levelTable}

### Flood: ${count(floodN)} identities, compact sliding-window

Where the identities' fields are after the drive (HLEN summed per level), and how many level-1 or level-2
keys left listpack.

${floodTable}

### Tollgate compact / peer, bytes per identity

${ratioTable}
`
process.stdout.write(`\n${report}`)

const out = reportPath('memory')
if (out !== '-') {
  writeResults(out, report, 'memory')
  log(`\nwritten to ${path.relative(process.cwd(), out)}`)
  if (process.env.BENCH_CHART !== '-') {
    // as writeResults: a run in benchmarks/results/ draws the docs' chart, any other one its own
    const current = path.resolve(path.dirname(out)) === path.resolve(RESULTS_DIR)
    const svg = current ? path.join(IMAGES_DIR, 'memory-scale.svg') : `${out.replace(/\.md$/, '')}-scale.svg`
    fs.writeFileSync(svg, renderSvg(memoryScaleChart(parseReport(report, 'memory', path.basename(out)))))
    log(`scale chart: ${path.relative(process.cwd(), svg)}`)
  }
}
