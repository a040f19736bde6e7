/**
 * What one decision costs Redis, script by script: Redis main-thread CPU (INFO cpu, user + sys) per
 * decision while `redis-benchmark -c 50 -P 16` keeps Redis busy with one script (pipelined, so reading
 * and writing the connections costs little per call, as under a Node client with many calls in flight).
 * Against rate-limiter-flexible's own script and against floors (an empty script, the bare commands the
 * sliding window sends), so the gap between them is the Lua work.
 *
 * Rows: Tollgate's lone-call script (what a call alone in its turn runs: `BY_ALGORITHM[code].consume`, for
 * the sliding and the fixed window, and refused at the limit, with the identity's control key, act_by and the pattern tail as RedisStore
 * sends them), the batch script (`BY_ALGORITHM[code].batch`, as RedisStore sends it: the pattern version and
 * the identities' control keys first, the policy declared once, one run of one-pair consumes) with 1 to 64 calls on distinct keys and 8 calls on one key, and 16 calls of two pairs each
 * (a decision there spends on two keys); 10,000 keys, admitted.
 *
 * `node --import tsx benchmarks/script-cost.mts [rounds]` (median of `rounds`, default 3; prints a
 * markdown table and writes it, with its JSON and chart, as `benchmarks/results/script-cost-<date>.md`;
 * `BENCH_OUT` elsewhere or `-`). Used for "What a decision costs Redis" in docs/benchmarks.md.
 * @module
 */
import { execFileSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import * as scripts from '@tollgate/core/scripts'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient } from 'redis'
import { median } from './lib/measure'
import { redisCpuUs } from './lib/redis-cpu'
import { startBenchRedis } from './lib/redis-server'
import { writeResults } from './lib/results'

const ROUNDS = Number(process.argv[2] ?? 3)
const DECISIONS = 400_000
const redis = await startBenchRedis()
const client = await createClient({ url: redis.url }).connect()

const rlfScript = String(
  (new RateLimiterRedis({ storeClient: client, useRedisPackage: true, points: 1, duration: 1 }) as any)
    ._incrTtlLuaScript,
)
const POLICY = ['2', '1000000', '60000', '1000000'] // sliding-window, a limit nothing reaches, 60 s
const FIXED = ['1', '1000000', '60000', '1000000'] // fixed-window, the same limit and window
const AT_LIMIT = ['2', '1', '60000', '1'] // sliding-window, 1 per minute: refused from each key's second call
const SLIDING_WINDOW = scripts.BY_ALGORITHM[scripts.ALGORITHM_CODES['sliding-window']]!
const FIXED_WINDOW = scripts.BY_ALGORITHM[scripts.ALGORITHM_CODES['fixed-window']]!
const K = '\u0000k' // a distinct random key per occurrence (redis-benchmark's __rand_int__)
const H = '\u0000h' // one hot key
// a lone call's keys as RedisStore sends them: the pair key, its identity's control key (none stored),
// the prefix's pattern version key (none stored: version 0)
const P = '\u0000p'
const Q = '\u0000q'
const C = '\u0000c'
const V = '\u0000v'
/**
 * A lone call as RedisStore sends it: KEYS = { pair, control, version }, ARGV = cost, the pair, act_by (0:
 * none), the bare pattern tail (no pattern matched).
 */
const lone = (name: string, source: string, policy: readonly string[]): Row => ({
  name,
  source,
  args: ['3', P, C, V, '1', ...policy, '0', '~0'],
  decisions: 1,
})

interface Row {
  readonly name: string
  readonly source: string
  /** KEYS count, then KEYS (K, H or literal) and ARGV. */
  readonly args: readonly string[]
  /** Decisions per script call (0 for a floor that decides nothing: the cost per call is shown). */
  readonly decisions: number
}
const STRAIGHT_SW = `local t = redis.call('TIME')
local now_ms = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
local cost, limit, window, key = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4]), KEYS[1]
local wid = math.floor(now_ms / window)
local e = now_ms - wid * window
local curr, prev, inc = 0, 0, false
local got = redis.pcall('GET', key)
if type(got) == 'string' then
  local n = tonumber(got)
  if n and n >= 0 and n <= 4503599627370495 and n == math.floor(n) then
    local exp = redis.call('PEXPIRETIME', key)
    if exp > 0 then
      local sw = math.floor(exp / window + 0.5) - 2
      if sw == wid then curr, prev, inc = n % 67108864, math.floor(n / 67108864), true
      elseif sw == wid - 1 then prev = n % 67108864 end
    end
  end
end
local weighted = math.ceil(prev * (window - e) / window)
if cost <= limit and weighted + curr + cost <= limit then
  if not (inc and type(redis.pcall('INCRBY', key, cost)) == 'number') then
    redis.call('SET', key, curr + cost + prev * 67108864, 'PXAT', (wid + 2) * window) end
  return { now_ms, 1, 1, limit - weighted - curr - cost, 2 * window - e, 0, wid }
end
return { now_ms, 0, 0, 0, 0, 1, wid }`
/**
 * A batch as the batcher sends it: KEYS = { version, `controls` control keys, `pairs` pair keys }, ARGV =
 * the pattern version ('v'), the control keys ('~'), then `rest`.
 */
const sent = (controls: number, pairs: readonly string[], rest: readonly string[]): string[] => [
  String(1 + controls + pairs.length),
  V,
  ...Array.from({ length: controls }, () => C),
  ...pairs,
  'v',
  '0',
  '~',
  String(controls),
  ...rest,
]
const batch = (n: number, key: string, fixed = false): Row => ({
  name: `Tollgate batch script, ${n} call${n > 1 ? 's' : ''}${key === H ? ', one key' : ''}${fixed ? ' (fixed window)' : ''}`,
  source: (fixed ? FIXED_WINDOW : SLIDING_WINDOW).batch.source,
  args: sent(
    key === H ? 1 : n,
    Array.from({ length: n }, () => key),
    ['#', ...(fixed ? FIXED : POLICY), 'x', '1', '1', String(n)],
  ),
  decisions: n,
})
/** `n` calls of two pairs each (per IP and per account, say) on distinct keys: one 'm' run, or per call. */
const twoPairs = (n: number, run: boolean): Row => ({
  name: `Tollgate batch script, ${n} calls of two pairs${run ? ' (one run, as sent)' : ' (per-call form)'}`,
  source: SLIDING_WINDOW.batch.source,
  args: sent(
    2 * n,
    Array.from({ length: 2 * n }, () => K),
    run
      ? ['#', ...POLICY, '#', ...POLICY, 'm', '1', '2', String(n), '1', '2']
      : Array.from({ length: n }, () => ['c', '1', '2', ...POLICY, ...POLICY]).flat(),
  ),
  decisions: n,
})
const rows: Row[] = [
  {
    name: 'rate-limiter-flexible (SET NX, INCRBY, PTTL)',
    source: rlfScript,
    args: ['1', K, '1', '60', '60'],
    decisions: 1,
  },
  lone('Tollgate lone call (consume_sliding_window)', SLIDING_WINDOW.consume.source, POLICY),
  lone('Tollgate lone call (consume_fixed_window)', FIXED_WINDOW.consume.source, FIXED),
  {
    // two policies of one identity (a burst and a sustained limit, say): two pair keys, one control key
    name: 'Tollgate lone call of two pairs (consume_sliding_window)',
    source: SLIDING_WINDOW.consume.source,
    args: ['4', P, Q, C, V, '1', ...POLICY, ...POLICY, '0', '~0'],
    decisions: 1,
  },
  // at the limit: 1 per minute on 10,000 keys, so all but each key's first call are refused (the peer's
  // script spends the same whatever its limit: its row above is its cost at the limit too)
  lone(
    'Tollgate lone call, refused (consume_sliding_window, limit 1)',
    SLIDING_WINDOW.consume.source,
    AT_LIMIT,
  ),
  ...[1, 2, 5, 8, 16, 64].map((n) => batch(n, K)),
  batch(16, K, true),
  batch(8, H),
  twoPairs(16, true),
  twoPairs(16, false),
  {
    // Not shipped: what a hand-written, straight-line one-pair sliding window (no closures, no result
    // tables; without the checks of foreign state) costs, to bound a leaner lone call.
    name: 'experiment: straight-line one-pair sliding window',
    source: STRAIGHT_SW,
    args: ['1', K, '1', ...POLICY],
    decisions: 1,
  },
  { name: 'floor: empty script (`return 1`)', source: 'return 1', args: ['1', K], decisions: 0 },
  {
    // what a lone sliding-window call sends when its identity has no control key stored and no pattern
    // was ever set (one EXISTS asks for both)
    name: 'floor: TIME, EXISTS (control, version), INCRBY, 7 integers back',
    source:
      "redis.call('TIME') redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[3]) redis.call('INCRBY', KEYS[1], 2) return {1, 2, 3, 4, 5, 6, 7}",
    args: ['3', P, C, V],
    decisions: 0,
  },
  {
    // a decision's own commands, with no control entry to ask for
    name: 'floor: TIME, INCRBY, 7 integers back',
    source: "redis.call('TIME') redis.call('INCRBY', KEYS[1], 2) return {1, 2, 3, 4, 5, 6, 7}",
    args: ['1', K],
    decisions: 0,
  },
]

const cpuUs = () => redisCpuUs(client)
// each row on keys of its own: a key one script wrote is another's foreign value (the peer's INCRBY
// would shift a window's parity, a sliding value would read as a fixed window's count far over its limit)
const keyArgs = (row: number): Record<string, string> => ({
  [K]: `sc${row}:__rand_int__`,
  [H]: `sc${row}:hot`,
  [P]: `sc${row}:{__rand_int__}:api:s`,
  [Q]: `sc${row}:{__rand_int__}:day:s`,
  [C]: `sc${row}:{__rand_int__}:~c`,
  [V]: `sc${row}:~v`,
})

const perDecision = new Map<string, number[]>(rows.map((r) => [r.name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, row] of rows.entries()) {
    const sha = String(await client.sendCommand(['SCRIPT', 'LOAD', row.source]))
    const calls = Math.round(DECISIONS / Math.max(1, row.decisions))
    const keys = keyArgs(i)
    const args = row.args.map((a) => keys[a] ?? a)
    const before = await cpuUs()
    execFileSync('redis-benchmark', [
      ...['-p', String(redis.port), '-c', '50', '-P', '16', '-n', String(calls), '-r', '10000', '-q'],
      ...['EVALSHA', sha, ...args],
    ])
    const used = (await cpuUs()) - before
    perDecision.get(row.name)!.push(used / calls / Math.max(1, row.decisions))
  }
  // every round, as it ends: rounds on a shared VM can differ by more than the rows do
  process.stderr.write(
    `round ${round + 1}: ${rows.map((r) => perDecision.get(r.name)!.at(-1)!.toFixed(2)).join(' ')}\n`,
  )
}

// a row over the peer: the median of the rounds' own ratios (the machine's speed drifts between rounds)
const peerRounds = perDecision.get(rows[0]!.name)!
const started = new Date().toISOString()
const cpus = os.cpus()
const lines = [
  `## Script cost, ${started.slice(0, 16).replace('T', ' ')} UTC`,
  '',
  `Machine: ${cpus.length} × ${cpus[0]?.model.split(' ').slice(0, 2).join(' ') ?? 'unknown CPU'}, Node ${process.version}, ` +
    `rate-limiter-flexible's own script; \`node --import tsx benchmarks/script-cost.mts ${ROUNDS}\`.`,
  '',
  `Redis ${String(await client.sendCommand(['INFO', 'server'])).match(/redis_version:(\S+)/)?.[1]}, ` +
    `redis-benchmark -c 50 -P 16, 10,000 keys, median of ${ROUNDS} rounds (${started})`,
  '',
  '| Script | Redis CPU µs per decision (floors: per call) | rounds, min–max | vs rate-limiter-flexible |',
  '| --- | ---: | ---: | ---: |',
  ...rows.map((r) => {
    const all = perDecision.get(r.name)!
    const us = median(all)
    const spread = `${Math.min(...all).toFixed(2)}–${Math.max(...all).toFixed(2)}`
    const ratio = median(all.map((x, round) => x / peerRounds[round]!))
    return `| ${r.name} | ${us.toFixed(2)} | ${spread} | ${r.decisions ? `${ratio.toFixed(2)}×` : '—'} |`
  }),
]
const report = `${lines.join('\n')}\n`
process.stdout.write(report)
const out =
  process.env.BENCH_OUT ??
  path.join(path.dirname(fileURLToPath(import.meta.url)), 'results', `script-cost-${started.slice(0, 10)}.md`)
if (out !== '-') writeResults(out, report, 'script-cost')
await client.quit()
await redis.stop()
