/**
 * Core throughput + memory benchmark (root `pnpm bench`). One run, one freshly spawned redis-server:
 *
 *  1. decisions/s of Tollgate's `RateLimiter.consume()` with 256 calls in flight, one hot key and 10,000
 *     keys round-robin, five algorithms on node-redis v6 and sliding-window on ioredis; against
 *     rate-limiter-flexible's `RateLimiterRedis.consume()` on the same clients and keys; and a hot key
 *     far over its limit (mostly refusals) for both;
 *  2. the ceiling: `redis-benchmark -c 50 EVALSHA <consume> …` for each algorithm and key mode (Redis
 *     running our script with a C client and no Node in the way);
 *  3. Redis bytes per key (`MEMORY USAGE key SAMPLES 0`) per algorithm and for rate-limiter-flexible;
 *  4. per variant, Redis' own cost per decision (INFO commandstats and INFO cpu) and the mean batch size;
 *     and the Redis CPU of one batch script per batch size (1 to 256 calls), the bound of `maxSize`.
 *
 * Every variant runs in a fresh Node process of its own each round (BENCH_IN_PROCESS=1: all in this one,
 * warmed up once), is warmed up, then measured; rounds run every variant in turn
 * (Tollgate and peer interleaved: A B A B …), and the tables show the median over rounds (of a ratio to
 * the peer: the median of the rounds' own ratios).
 *
 * Knobs (env): BENCH_DURATION_MS (1500), BENCH_ROUNDS (5), BENCH_WARMUP_MS (2000), BENCH_CONCURRENCY (256),
 * BENCH_CEILING_MS (1000, target length of one redis-benchmark run), BENCH_OUT (results file; '-' = none),
 * BENCH_IN_PROCESS (1: every variant in this process).
 */
import { execFile } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { type Algorithm, RateLimiter, RedisStore } from '@tollgate/core'
import * as scripts from '@tollgate/core/scripts'
import { ALGORITHM_CODES } from '@tollgate/core/scripts'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient } from 'redis'
import { TOLLGATE_BUILD } from './lib/build'
import { isolate } from './lib/isolated'
import { type Measurement, measure, median } from './lib/measure'
import { redisCpuUs, startBenchRedis } from './lib/redis-server'
import { reportPath, writeResults } from './lib/results'
import {
  ALGORITHMS,
  allVariants,
  HIGH_LIMIT,
  KEYSPACE,
  type KeyMode,
  LOG_HOT_WINDOW_MS,
  LOG_LIMIT,
  LOW_LIMIT,
  label,
  makeOp,
  peerOf,
  policyOf,
  RESERVE_LIMIT,
  RESERVES,
  type Variant,
  WINDOW_S,
} from './lib/variants'

const run = promisify(execFile)
const env = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt)
const DURATION_MS = env('BENCH_DURATION_MS', 1500)
const ROUNDS = env('BENCH_ROUNDS', 5)
const WARMUP_MS = env('BENCH_WARMUP_MS', 2000)
const CONCURRENCY = env('BENCH_CONCURRENCY', 256)
const CEILING_MS = env('BENCH_CEILING_MS', 1000)

const t0 = Date.now()
const load0 = os.loadavg()
const log = (s: string) => process.stderr.write(`${s}\n`)

const redis = await startBenchRedis()
const nodeRedis = await createClient({ url: redis.url })
  .on('error', (e) => log(`node-redis error: ${e}`))
  .connect()
const nodeRedisNt = await createClient({ url: redis.url, commandOptions: { timeout: 0 } })
  .on('error', (e) => log(`node-redis error: ${e}`))
  .connect()
const ioredis = new Redis(redis.url)
ioredis.on('error', (e) => log(`ioredis error: ${e}`))
const clients = { 'node-redis': nodeRedis, 'node-redis-nt': nodeRedisNt, ioredis }

const info = String(await nodeRedis.sendCommand(['INFO', 'server']))
const redisVersion = /redis_version:(\S+)/.exec(info)?.[1] ?? '?'
const sha = String(await nodeRedis.sendCommand(['SCRIPT', 'LOAD', scripts.CONSUME.source]))
if (sha !== scripts.CONSUME.sha1)
  throw new Error(`SCRIPT LOAD gave ${sha}, generated.ts says ${scripts.CONSUME.sha1}`)
log(`redis-server ${redisVersion} on port ${redis.port} (pid ${redis.pid}); consume sha ${sha}`)

// ---- 1. throughput --------------------------------------------------------------------------------

const variants = allVariants()
// Each variant in a Node process of its own, as an app runs its limiter (lib/isolated.ts), and a fresh
// one each round: one process can run a third faster or slower than another of the same variant for its
// whole life (how V8 compiled it), so the median over rounds is over processes too.
// BENCH_IN_PROCESS=1 runs them all in this one, sharing its call sites.
const IN_PROCESS = process.env.BENCH_IN_PROCESS === '1'
type Measure = (o: { durationMs: number; concurrency: number }) => Promise<Measurement>
const inProcess = new Map<string, Measure>()
if (IN_PROCESS) {
  for (const v of variants) {
    const op = makeOp(v, clients)
    inProcess.set(v.id, (o) => measure(op, o))
  }
}
/** One round's variants: this process's, or a process each, all started before the round measures. */
async function roundOf(): Promise<Map<string, { measure: Measure; stop(): void }>> {
  if (IN_PROCESS) return new Map([...inProcess].map(([id, m]) => [id, { measure: m, stop() {} }]))
  const started = await Promise.all(variants.map((v) => isolate(v, redis.url)))
  return new Map(variants.map((v, i) => [v.id, started[i]!]))
}
async function warm(v: Variant, m: Measure): Promise<void> {
  const w = await m({ concurrency: CONCURRENCY, durationMs: WARMUP_MS })
  if (w.errors || w.fallbacks) {
    log(
      `  ${v.id}: ${w.errors} errors, ${w.fallbacks} fallbacks in warm-up; first error: ${String(w.firstError)}`,
    )
  }
}
const runs = new Map<string, Measurement[]>(variants.map((v) => [v.id, []]))

/** Redis' own account of one measurement: script calls (EVAL + EVALSHA) and the µs Redis spent in them. */
interface ScriptStats {
  calls: number
  usec: number
  /** Redis main-thread CPU µs (user + sys) since the last reset: its whole cost, I/O included. */
  cpu: number
}
let cpuMark = 0
const send = (args: string[]) => nodeRedis.sendCommand(args)
/** CONFIG RESETSTAT and a CPU mark: the start of one measurement of {@link scriptStats}. */
async function resetStats(): Promise<void> {
  await nodeRedis.sendCommand(['CONFIG', 'RESETSTAT'])
  cpuMark = await redisCpuUs(send)
}
const redisStats = new Map<string, ScriptStats[]>(variants.map((v) => [v.id, []]))
async function scriptStats(): Promise<ScriptStats> {
  const info = String(await nodeRedis.sendCommand(['INFO', 'commandstats']))
  const out = { calls: 0, usec: 0, cpu: (await redisCpuUs(send)) - cpuMark }
  for (const m of info.matchAll(/cmdstat_(?:eval|evalsha):calls=(\d+),usec=(\d+)/g)) {
    out.calls += Number(m[1])
    out.usec += Number(m[2])
  }
  return out
}

// rate-limiter-flexible's own Lua (an instance property), for its row of the ceiling table.
const rlfScript = String(
  (new RateLimiterRedis({ storeClient: nodeRedis, useRedisPackage: true, points: 1, duration: 1 }) as any)
    ._incrTtlLuaScript,
)
const rlfSha = String(await nodeRedis.sendCommand(['SCRIPT', 'LOAD', rlfScript]))

interface Ceiling {
  readonly id: string
  /** Tollgate's consume script with this algorithm, or rate-limiter-flexible's INCR script. */
  readonly algorithm: Algorithm | 'rlf'
  readonly keys: KeyMode
  /** redis-benchmark -P: 1 = one request per connection at a time (the ceiling the tables use). */
  readonly pipeline: number
  readonly rps: number[]
  n: number
}
const ceiling = (algorithm: Ceiling['algorithm'], keys: KeyMode, pipeline = 1): Ceiling => ({
  id: `${algorithm}-${keys}${pipeline > 1 ? `-P${pipeline}` : ''}`,
  algorithm,
  keys,
  pipeline,
  rps: [],
  n: 10_000 * Math.sqrt(pipeline), // a first guess; later runs are sized from the measured rate
})
const ceilings: Ceiling[] = [
  ...ALGORITHMS.flatMap((a) => [ceiling(a, 'hot'), ceiling(a, '10k')]),
  ceiling('sliding-window', '10k', 16),
  ceiling('sliding-window', 'hot-refused'),
  ceiling('rlf', 'hot'),
  ceiling('rlf', '10k'),
  ceiling('rlf', '10k', 16),
  ceiling('rlf', 'hot-refused'),
]

async function redisBenchmark(c: Ceiling): Promise<number> {
  const { limit, windowMs } = policyOf(c.algorithm, c.keys)
  const key = c.keys === '10k' ? `ceil-${c.algorithm}:__rand_int__` : `ceil-${c.algorithm}:${c.keys}`
  const args = ['-p', String(redis.port), '-c', '50', '-n', String(c.n), '-r', String(KEYSPACE)]
  args.push('-P', String(c.pipeline), '--csv')
  if (c.algorithm === 'rlf') {
    // rate-limiter-flexible's call: KEYS[1], ARGV = points to spend, duration s, points, duration s
    const s = String(windowMs / 1000)
    args.push('EVALSHA', rlfSha, '1', key, '1', s, String(limit), s)
  } else {
    args.push(
      'EVALSHA',
      sha,
      '1',
      key,
      '1',
      String(ALGORITHM_CODES[c.algorithm]),
      String(limit),
      String(windowMs),
      String(limit),
    )
  }
  const { stdout } = await run('redis-benchmark', args, { maxBuffer: 1 << 20 })
  const line = stdout.trim().split('\n').at(-1) ?? ''
  const rps = Number(line.split('","')[1])
  if (!Number.isFinite(rps) || rps <= 0) throw new Error(`cannot read redis-benchmark output:\n${stdout}`)
  // Size the next run to last about CEILING_MS.
  c.n = Math.max(5_000, Math.round((rps * CEILING_MS) / 1000))
  return rps
}

if (IN_PROCESS) {
  log(`warm-up: ${variants.length} variants x ${WARMUP_MS} ms`)
  for (const v of variants) await warm(v, inProcess.get(v.id)!)
}

for (let round = 1; round <= ROUNDS; round++) {
  log(`round ${round}/${ROUNDS}`)
  const ops = await roundOf()
  for (const v of variants) {
    const op = ops.get(v.id)!
    if (!IN_PROCESS) await warm(v, op.measure)
    await resetStats()
    const m = await op.measure({ concurrency: CONCURRENCY, durationMs: DURATION_MS })
    op.stop()
    runs.get(v.id)!.push(m)
    redisStats.get(v.id)!.push(await scriptStats())
    log(
      `  ${v.id.padEnd(44)} ${fmtInt(m.perSecond).padStart(7)}/s  admitted ${m.admitted} refused ${m.refused}` +
        ` (cached ${m.cached}) fallbacks ${m.fallbacks} errors ${m.errors}`,
    )
  }
  for (const c of ceilings) {
    const rps = await redisBenchmark(c)
    c.rps.push(rps)
    log(`  ceiling ${c.id.padEnd(28)} ${fmtInt(rps).padStart(7)}/s`)
  }
}

// ---- 1b. batch size: how long one batch script holds Redis ----------------------------------------

const BATCH_SIZES = [1, 8, 16, 32, 64, 128, 256]
const BATCH_ALGORITHMS: Algorithm[] = [
  'sliding-window',
  'fixed-window',
  'sliding-log',
  'token-bucket',
  'gcra',
]
interface BatchRow {
  algorithm: Algorithm
  keys: 'hot' | '10k'
  /** Per batch size: Redis µs per script call, and per decision. */
  perCall: number[]
  perDecision: number[]
}
const batchRows: BatchRow[] = []
for (const algorithm of BATCH_ALGORITHMS) {
  for (const keys of ['10k', 'hot'] as const) {
    const row: BatchRow = { algorithm, keys, perCall: [], perDecision: [] }
    const { limit, windowMs } = policyOf(algorithm, keys)
    const pair = [String(ALGORITHM_CODES[algorithm]), String(limit), String(windowMs), String(limit)]
    let n = 0
    for (const size of BATCH_SIZES) {
      const single = size === 1
      const own = scripts.BY_ALGORITHM[ALGORITHM_CODES[algorithm]]!
      const script = single ? own.consume : own.batch
      await nodeRedis.sendCommand(['SCRIPT', 'LOAD', script.source])
      const calls = Math.max(50, Math.round(20_000 / size))
      await resetStats()
      for (let c = 0; c < calls; c += 8) {
        await Promise.all(
          Array.from({ length: Math.min(8, calls - c) }, () => {
            const ids = Array.from({ length: size }, () => (keys === 'hot' ? 'hot' : String(n++ % KEYSPACE)))
            const pairs = ids.map((id) => `bs-${algorithm}:{${id}}:s`)
            const controls = [...new Set(ids)].map((id) => `bs-${algorithm}:{${id}}:~c`)
            const version = `bs-${algorithm}:~v`
            // what RedisStore sends for one limiter's calls: a lone call's pair, control and version
            // keys with act_by 0 and the bare pattern tail; a batch's pattern version and control keys
            // first, the policy declared once, then one run of `size` one-pair consumes of cost 1
            // ('v' … '~' … '#' … 'x' cost policy count, lua/entries/batch.lua)
            const [k, a] = single
              ? [
                  [pairs[0]!, controls[0]!, version],
                  ['1', ...pair, '0', '~0'],
                ]
              : [
                  [version, ...controls, ...pairs],
                  ['v', '0', '~', String(controls.length), '#', ...pair, 'x', '1', '1', String(size)],
                ]
            return nodeRedis.sendCommand(['EVALSHA', script.sha1, String(k.length), ...k, ...a])
          }),
        )
      }
      const st = await scriptStats()
      row.perCall.push(st.cpu / st.calls)
      row.perDecision.push(st.cpu / st.calls / size)
    }
    batchRows.push(row)
    log(
      `  batch sizes ${algorithm} ${keys}: µs/decision ${row.perDecision.map((x) => x.toFixed(2)).join(' ')}`,
    )
  }
}

// ---- 2. memory ------------------------------------------------------------------------------------

interface MemRow {
  what: string
  key: string
  type: string
  after1: number
  afterN: number
  n: number
}
const mem: MemRow[] = []
async function usage(key: string): Promise<number> {
  return Number(await nodeRedis.sendCommand(['MEMORY', 'USAGE', key, 'SAMPLES', '0']))
}
async function typeOf(key: string): Promise<string> {
  const type = String(await nodeRedis.sendCommand(['TYPE', key]))
  const enc = String(await nodeRedis.sendCommand(['OBJECT', 'ENCODING', key]))
  return `${type} (${enc})`
}
const memPolicies: { algorithm: Algorithm; limit: number }[] = [
  ...ALGORITHMS.map((algorithm) => ({ algorithm, limit: 100 })),
  { algorithm: 'sliding-log', limit: 1000 },
]
for (const { algorithm, limit } of memPolicies) {
  const limiter = new RateLimiter({
    store: new RedisStore(nodeRedis),
    prefix: `mem${limit}-${ALGORITHM_CODES[algorithm]}`, // a prefix per limiter: none may share one
    limit,
    window: '1m',
    algorithm,
  })
  const id = 'user:12345'
  const key = limiter.keysFor(id)[0]! // one policy, one key
  await limiter.consume(id)
  const after1 = await usage(key)
  for (let i = 1; i < limit; i++) await limiter.consume(id)
  mem.push({
    what: `Tollgate ${algorithm}, limit ${limit}/min`,
    key,
    type: await typeOf(key),
    after1,
    afterN: await usage(key),
    n: limit,
  })
}
{
  const rlf = new RateLimiterRedis({
    storeClient: nodeRedis,
    useRedisPackage: true,
    points: 100,
    duration: 60,
    keyPrefix: 'rlflx',
  })
  const id = 'user:12345'
  const key = rlf.getKey(id)
  await rlf.consume(id)
  const after1 = await usage(key)
  for (let i = 1; i < 100; i++) await rlf.consume(id)
  mem.push({
    what: 'rate-limiter-flexible, 100 points / 60 s',
    key,
    type: await typeOf(key),
    after1,
    afterN: await usage(key),
    n: 100,
  })
}

await nodeRedis.quit()
await nodeRedisNt.quit()
await ioredis.quit()
await redis.stop()

// ---- 3. report ------------------------------------------------------------------------------------

function fmtInt(x: number): string {
  return Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '—'
}
function fmtMs(x: number): string {
  return Number.isFinite(x) ? x.toFixed(x < 0.1 ? 3 : x < 10 ? 2 : 1) : '—'
}
function table(head: string[], rows: string[][], align: ('l' | 'r')[]): string {
  const sep = align.map((a) => (a === 'r' ? '---:' : '---'))
  return [head, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n')
}
const keysLabel: Record<KeyMode, string> = {
  hot: '1 hot key',
  '10k': '10k keys',
  'hot-refused': '1 hot key, refused',
}
const med = (v: Variant, f: (m: Measurement) => number) => median(runs.get(v.id)!.map(f))
const ceilingOf = (algorithm: string, keys: KeyMode, pipeline = 1) =>
  ceilings.find((c) => c.algorithm === algorithm && c.keys === keys && c.pipeline === pipeline)

/**
 * Redis' time per decision that reached it (INFO commandstats: usec of EVAL + EVALSHA over the decisions
 * not answered by the deny cache) and the decisions per script call (the mean batch size), median of rounds.
 */
function redisColumns(v: Variant): string[] {
  const all = runs.get(v.id)!
  const stats = redisStats.get(v.id)!
  const perDecision = median(all.map((m, i) => stats[i]!.usec / Math.max(1, m.decisions - m.cached)))
  const cpuPerDecision = median(all.map((m, i) => stats[i]!.cpu / Math.max(1, m.decisions - m.cached)))
  const perCall = median(all.map((m, i) => (m.decisions - m.cached) / Math.max(1, stats[i]!.calls)))
  if (stats.every((s) => s.calls === 0)) return ['—', '—', '—']
  return [perDecision.toFixed(2), cpuPerDecision.toFixed(2), perCall.toFixed(1)]
}

const rows: string[][] = []
const order: KeyMode[] = ['hot', '10k', 'hot-refused']
for (const keys of order) {
  for (const v of variants.filter((x) => x.keys === keys)) {
    const rps = med(v, (m) => m.perSecond)
    const all = runs.get(v.id)!
    const decided = all.reduce((s, m) => s + m.decisions, 0)
    const admittedPct = (100 * all.reduce((s, m) => s + m.admitted, 0)) / Math.max(1, decided)
    const errors = all.reduce((s, m) => s + m.errors, 0)
    const fallbacks = all.reduce((s, m) => s + m.fallbacks, 0)
    const cachedPct = (100 * all.reduce((s, m) => s + m.cached, 0)) / Math.max(1, decided)
    const problems = [errors ? `${errors} errors` : '', fallbacks ? `${fallbacks} fallbacks ⚠` : ''].filter(
      Boolean,
    )
    const peer = v.lib === 'tollgate' ? peerOf(v, variants) : undefined
    // the median of each round's own ratio: a round measures both within seconds, so a machine that
    // slows between rounds moves both
    const theirs = peer && runs.get(peer.id)!
    const ratio = theirs
      ? `${median(all.map((m, r) => m.perSecond / theirs[r]!.perSecond)).toFixed(2)}×`
      : '1.00× (peer)'
    const c = ceilingOf(v.lib === 'tollgate' ? v.algorithm : 'rlf', keys)
    // Answers from an in-process cache never reach Redis: a share of the Redis ceiling means nothing there.
    const inProcess = v.inMemoryBlock || v.reserve !== undefined || cachedPct > 50
    const pctCeil = c && !inProcess ? `${Math.round((100 * rps) / median(c.rps))}%` : '—'
    const spread = `${fmtInt(Math.min(...all.map((m) => m.perSecond)))}–${fmtInt(Math.max(...all.map((m) => m.perSecond)))}`
    rows.push([
      label(v),
      keysLabel[keys],
      `**${fmtInt(rps)}**`,
      spread,
      `${admittedPct.toFixed(admittedPct > 99.9 || admittedPct < 0.1 ? 1 : 0)}%${problems.length ? ` (${problems.join(', ')})` : ''}`,
      v.lib === 'tollgate' && v.keys === 'hot-refused' ? `${cachedPct.toFixed(0)}%` : '',
      ratio,
      pctCeil,
      fmtMs(med(v, (m) => m.p50Ms)),
      fmtMs(med(v, (m) => m.p99Ms)),
      ...redisColumns(v),
    ])
  }
}
const throughput = table(
  [
    'Variant',
    'Keys',
    'decisions/s (median)',
    'min–max',
    'admitted',
    'deny cache',
    'vs rate-limiter-flexible',
    '% of ceiling',
    'p50 ms',
    'p99 ms',
    'Redis script µs / decision',
    'Redis CPU µs / decision',
    'decisions / script call',
  ],
  rows,
  ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
)
const ceilingTable = table(
  ['EVALSHA (redis-benchmark -c 50)', '1 hot key', '10k keys', '1 hot key, refused', '10k keys, -P 16'],
  [...ALGORITHMS, 'rlf' as const].map((a) => [
    a === 'rlf' ? "rate-limiter-flexible's script" : `Tollgate consume, ${a}`,
    ...(
      [
        ['hot', 1],
        ['10k', 1],
        ['hot-refused', 1],
        ['10k', 16],
      ] as const
    ).map(([k, p]) => {
      const c = ceilingOf(a, k, p)
      return c ? fmtInt(median(c.rps)) : '—'
    }),
  ]),
  ['l', 'r', 'r', 'r', 'r'],
)
const batchTable = table(
  ['Script, keys', ...BATCH_SIZES.map((n) => (n === 1 ? '1 (consume.lua)' : `${n} calls`))],
  batchRows.map((r) => [
    `${r.algorithm}, ${r.keys === 'hot' ? '1 hot key' : '10k keys'}`,
    ...r.perCall.map((c, i) => `${r.perDecision[i]!.toFixed(2)} (${fmtInt(c)})`),
  ]),
  ['l', ...BATCH_SIZES.map(() => 'r' as const)],
)
const memTable = table(
  ['Key', 'Redis key', 'type (encoding)', 'bytes after 1 call', 'bytes after N calls', 'N'],
  mem.map((m) => [m.what, `\`${m.key}\``, m.type, String(m.after1), String(m.afterN), String(m.n)]),
  ['l', 'l', 'l', 'r', 'r', 'r'],
)

const seconds = ((Date.now() - t0) / 1000).toFixed(0)
const cpus = os.cpus()
const report = `## Core benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? '?'} (shared; the Node client, redis-server and redis-benchmark compete for it),
load average ${load0.map((x) => x.toFixed(2)).join(' ')} at start, ${os
  .loadavg()
  .map((x) => x.toFixed(2))
  .join(' ')} at end.
Node ${process.version}, ${TOLLGATE_BUILD}, redis-server ${redisVersion} (fresh, no persistence), node-redis 6.3.1 (RESP3), ioredis 6.0.0 (defaults,
no auto-pipelining), rate-limiter-flexible 11.4.0. ${CONCURRENCY} calls in flight on one connection per client;
${WARMUP_MS} ms warm-up per variant${IN_PROCESS ? '' : ' and round'}, then ${ROUNDS} rounds × ${DURATION_MS} ms per variant, interleaved; median shown. ${IN_PROCESS ? 'Every variant in this one process (BENCH_IN_PROCESS=1).' : 'Each variant in a fresh Node process of its own each round.'}
Admitted runs: limit ${HIGH_LIMIT.toLocaleString('en-US')} per ${WINDOW_S} s (sliding-log: ${LOG_LIMIT.toLocaleString('en-US')}, its maximum, per ${WINDOW_S} s on
10k keys and per ${LOG_HOT_WINDOW_MS} ms on the hot key; \`reserve\`: ${RESERVE_LIMIT.toLocaleString('en-US')} per ${WINDOW_S} s); "refused" runs: limit ${LOW_LIMIT} per ${WINDOW_S} s on one key. Run took ${seconds} s.

### Decisions per second

${throughput}

"admitted": share of decisions admitted. A "fallback" (the limiter's store-failure policy answering after a
timeout or with the breaker open) is not a decision: not counted, flagged ⚠. "deny cache": share of decisions
that were refusals answered in-process by Tollgate's deny cache (on by default), without a Redis call.
"vs rate-limiter-flexible": the median of the rounds' own ratios, against \`RateLimiterRedis.consume()\` on the same client and keys (the deny-cache
row against its \`inMemoryBlockOnConsumed\` row, the others against its default). "% of ceiling": against
redis-benchmark running the same script (Tollgate's consume with the same algorithm, or rate-limiter-flexible's
own) on the same kind of keys, one request per connection at a time (below). Node clients pipeline the
${CONCURRENCY} calls in flight on one connection, so they can pass that ceiling; the -P 16 column is closer to a
pipelined bound. "no cmd timeout": node-redis with \`commandOptions: { timeout: 0 }\` (node-redis 6 otherwise
arms a 5 s timeout, an AbortSignal, per command). Tollgate runs with \`timeoutMs: 5000\` instead of its 500 ms
default, so that a stall of this shared machine does not turn a run into fail-open fallbacks. Latency is per
call as Node sees it, with ${CONCURRENCY} in flight (so mostly queueing: ≈ ${CONCURRENCY} / throughput).
"batch: false": Tollgate with \`new RedisStore(client, { batch: false })\`, every call its own script; the other
Tollgate rows batch (the default: the calls of one event-loop turn go as one script, up to 64). "Redis script
µs / decision": INFO commandstats usec of EVAL + EVALSHA (wall clock inside Redis, so it grows when this
shared machine preempts Redis) over the decisions that reached Redis; "Redis CPU µs / decision": Redis'
main-thread CPU (INFO cpu, user + sys) over the same, reading and parsing the commands and writing the
replies included; "decisions / script call": the mean batch size seen (rate-limiter-flexible: 1 EVAL each).
"reserve": Tollgate with \`reserve: ${RESERVES.join('` or `')}\` (docs/reserve.md): the process takes that many units per store
call and decides the calls between from them, so its Redis columns are per decision, most of which never reached Redis.

### Ceiling: redis-benchmark, requests per second

${ceilingTable}

\`redis-benchmark -p PORT -c 50 -n N -r ${KEYSPACE} [-P 16] EVALSHA SHA 1 KEY ARGV…\`; Tollgate: SHA ${sha},
ARGV = 1 ALG LIMIT WINDOW_MS LIMIT (ALG = 1 fixed-window, 2 sliding-window, 3 sliding-log, 4 token-bucket,
5 gcra); rate-limiter-flexible: its script loaded with SCRIPT LOAD, ARGV = 1 60 LIMIT 60. KEY =
\`ceil-ALG:__rand_int__\` (10k keys) or one fixed key, with the policy of the matching rows above; median of
${ROUNDS} runs of ~${CEILING_MS} ms.

### Batch size: Redis CPU µs per decision (per script call)

${batchTable}

Each cell: one EVALSHA of the batch script (\`BY_ALGORITHM[code].batch\`, the script a batch of one algorithm
runs) with that many consume calls of cost 1 as RedisStore sends them (the pattern version and the control
keys first, none stored; the policy declared once, then one run of one-pair consumes: \`v 0 ~ M # … x 1 1
N\`), the policy of the rows above, sent 8 at a time from one
connection; Redis main-thread CPU (INFO cpu, user + sys: unlike commandstats' wall-clock usec it does not
grow when this shared machine preempts Redis) over the script calls, per decision and, in parentheses, per
script: how long one batch holds Redis. Column 1 is today's single-call script, as a lone call runs it.

### Redis memory per key

${memTable}

\`MEMORY USAGE key SAMPLES 0\`: key name + value + Redis' per-key overhead (the TTL's entry in the expires
dict is not counted). N = the limit: the key full.
`

process.stdout.write(`\n${report}`)
const out = reportPath('core')
if (out !== '-') {
  writeResults(out, report, 'core')
  log(`\nwritten to ${path.relative(process.cwd(), out)}`)
}
