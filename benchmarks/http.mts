/**
 * HTTP throughput of Tollgate's adapters against each framework's bare app and its usual peer limiter on
 * Redis, with autocannon. Per framework (Express 5, Fastify 5, Hono 4 on @hono/node-server), four server
 * processes on one spawned redis-server:
 *
 * - `bare`: one route, `GET /hello` answering `{"hello":"world"}`;
 * - `tollgate`: the same app limited app-wide by Tollgate (defaults: sliding-window, node-redis client,
 *   keyed on the client IP), limit 5e7 per minute so nothing is ever refused;
 * - `peer`: the same with the framework's peer on Redis, same limit (express-rate-limit + rate-limit-redis,
 *   @fastify/rate-limit with ioredis, hono-rate-limiter's RedisStore);
 * - `refused`: Tollgate with limit 1 per hour: after its first request the one client is refused, from
 *   the deny cache;
 * - `tollgate-10k` / `peer-10k`: Tollgate and the peer keyed by a `key` function (the peers'
 *   `keyGenerator`) on an `x-identity` header, which autocannon sets to one of 10,000 values in turn.
 *
 * Tollgate uses the peer's client library: ioredis on Fastify, node-redis on Express and Hono.
 *
 * Each server is its own process; autocannon (50 connections, one request in flight each) runs here. After
 * a warm-up, `ROUNDS` rounds run the variants in turn (bare, tollgate, peer, refused, tollgate-10k,
 * peer-10k, bare, …); the table shows the median. `BENCH_HTTP_CPU_PROF=<dir>` has every server write a V8
 * CPU profile there (`<framework>-<variant>.cpuprofile`, from listening to exit; summarise with
 * `lib/http-profile.mts`). Every response's status is counted: an admitting run with any non-2xx response (or a
 * refused run with anything but 429) stops the benchmark with an error.
 *
 * Run: `pnpm bench:http` (or `node --import tsx benchmarks/http.mts`). Report on stdout and in
 * `benchmarks/results/http-<date>.md`; progress on stderr.
 * @module
 */
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createClient } from 'redis'
import { TOLLGATE_BUILD } from './lib/build'
import { FRAMEWORKS, type Framework } from './lib/http-apps.mts'
import { formatStatuses, type LoadRun, load, unexpected } from './lib/http-load.mts'
import { type ServerProcess, startServer } from './lib/http-process.mts'
import {
  expectedStatus,
  HIGH_LIMIT,
  HIGH_WINDOW_MS,
  IDENTITIES,
  IDENTITY_HEADER,
  keyedOnHeader,
  PATH,
  REFUSED_WINDOW_MS,
  type ServerEvents,
  VARIANTS,
  type Variant,
} from './lib/http-variants.mts'
import { median } from './lib/measure'
import { startBenchRedis } from './lib/redis-server'
import { reportPath, writeResults } from './lib/results'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const env = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt)
const DURATION_S = env('BENCH_HTTP_DURATION_S', 3)
const ROUNDS = env('BENCH_HTTP_ROUNDS', 5)
const WARMUP_S = env('BENCH_HTTP_WARMUP_S', 1.5)
const CONNECTIONS = env('BENCH_HTTP_CONNECTIONS', 50)
const frameworks = (process.env.BENCH_HTTP_FRAMEWORKS?.split(',') ?? FRAMEWORKS) as Framework[]
for (const f of frameworks) if (!FRAMEWORKS.includes(f)) throw new Error(`unknown framework ${f}`)

const t0 = Date.now()
const load0 = os.loadavg()
const log = (s: string) => process.stderr.write(`${s}\n`)
const fmtInt = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '—')
const fmtMs = (x: number) => (Number.isFinite(x) ? (Number.isInteger(x) ? String(x) : x.toFixed(1)) : '—')

function versionOf(name: string): string {
  const file = path.join(HERE, 'node_modules', name, 'package.json')
  return (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version
}

const redis = await startBenchRedis()
const admin = createClient({ url: redis.url })
admin.on('error', (e: Error) => log(`admin node-redis: ${e.message}`))
await admin.connect()
const redisVersion = /redis_version:(\S+)/.exec(String(await admin.sendCommand(['INFO', 'server'])))?.[1]
log(`redis-server ${redisVersion} on port ${redis.port} (pid ${redis.pid})`)

/** Commands redis-server has processed, and its CPU time in microseconds (user + system). */
async function redisCounters(): Promise<{ commands: number; cpuUs: number }> {
  const info = String(await admin.sendCommand(['INFO']))
  const num = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1])
  return {
    commands: num('total_commands_processed'),
    cpuUs: 1e6 * (num('used_cpu_user') + num('used_cpu_sys')),
  }
}

interface Measured {
  run: LoadRun
  /** Redis commands processed during the run, per response. */
  redisPerRequest: number
  /** CPU microseconds per response: the server process, redis-server, and autocannon (this process). */
  serverUs: number
  redisUs: number
  clientUs: number
  events: ServerEvents
}

const results = new Map<string, Measured[]>() // `${framework}/${variant}`
const limiterNames = new Map<string, string>()

function diff(a: ServerEvents, b: ServerEvents): ServerEvents {
  const out = { ...b }
  for (const k of Object.keys(out) as (keyof ServerEvents)[]) out[k] = b[k] - a[k]
  return out
}

/** One load run against one server, with its statuses checked. `warmUp` tolerates the refused client's first 200. */
async function runOnce(s: ServerProcess, durationS: number, warmUp: boolean): Promise<Measured> {
  const ev0 = await s.events()
  const redis0 = await redisCounters()
  const client0 = process.cpuUsage()
  const run = await load(s.url, {
    connections: CONNECTIONS,
    durationS,
    path: PATH,
    ...(keyedOnHeader(s.variant) ? { identityHeader: IDENTITY_HEADER, identities: IDENTITIES } : {}),
  })
  const client = process.cpuUsage(client0)
  const redis1 = await redisCounters()
  const events = diff(ev0, await s.events())
  let bad = unexpected(run, expectedStatus(s.variant))
  if (warmUp && s.variant === 'refused' && /^1 × 200$/.test(bad)) bad = ''
  if (bad || run.total === 0) {
    throw new Error(
      `${s.framework}/${s.variant}: expected only ${expectedStatus(s.variant)} responses, got ${formatStatuses(run.statuses)}` +
        ` (${bad || 'no responses'}); see the server's output above`,
    )
  }
  if (events.fallback || events['store-error'] || events.timeout) {
    log(
      `  ⚠ ${s.framework}/${s.variant}: ${events.fallback} fallbacks, ${events.timeout} timeouts, ${events['store-error']} store errors` +
        ' (answered by the failure policy, not Redis)',
    )
  }
  // Minus the one INFO command of the second reading.
  return {
    run,
    redisPerRequest: (redis1.commands - redis0.commands - 1) / run.total,
    serverUs: events.cpuUs / run.total,
    redisUs: (redis1.cpuUs - redis0.cpuUs) / run.total,
    clientUs: (client.user + client.system) / run.total,
    events,
  }
}

/** The headers a variant's first response carries, checked against what the variant is. */
async function preflight(s: ServerProcess): Promise<void> {
  const res = await fetch(s.url + PATH, { headers: { [IDENTITY_HEADER]: 'user:preflight' } })
  await res.text()
  const names = [...res.headers.keys()].filter((n) => /ratelimit|retry-after/i.test(n))
  const ok =
    res.status === 200 &&
    (s.variant === 'bare'
      ? names.length === 0
      : s.variant === 'peer' || s.variant === 'peer-10k'
        ? names.length > 0
        : names.includes('ratelimit') && names.includes('ratelimit-policy'))
  if (!ok) throw new Error(`${s.framework}/${s.variant}: preflight got ${res.status} with [${names}]`)
}

for (const framework of frameworks) {
  log(`\n${framework}: starting ${VARIANTS.length} server processes`)
  const servers = await Promise.all(
    VARIANTS.map((v) => startServer(framework, v, redis.url, `bh-${framework}-${v}`)),
  )
  try {
    for (const s of servers) {
      await preflight(s)
      limiterNames.set(`${framework}/${s.variant}`, s.limiter)
      results.set(`${framework}/${s.variant}`, [])
    }
    log(`  warm-up: ${WARMUP_S} s per variant`)
    for (const s of servers) await runOnce(s, WARMUP_S, true)
    for (let round = 1; round <= ROUNDS; round++) {
      for (const s of servers) {
        const m = await runOnce(s, DURATION_S, false)
        results.get(`${framework}/${s.variant}`)!.push(m)
        log(
          `  round ${round}/${ROUNDS} ${s.variant.padEnd(8)} ${fmtInt(m.run.rps).padStart(7)} req/s` +
            `  p50 ${m.run.p50Ms} ms p99 ${m.run.p99Ms} ms  ${formatStatuses(m.run.statuses)}` +
            `  redis ${m.redisPerRequest.toFixed(2)} cmds/req` +
            `  CPU µs/req: server ${m.serverUs.toFixed(0)} redis ${m.redisUs.toFixed(0)} autocannon ${m.clientUs.toFixed(0)}` +
            (m.events['cache-hit'] ? `  deny-cache hits ${m.events['cache-hit']}` : ''),
        )
      }
    }
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
  }
}

await admin.quit()
await redis.stop()

// ---- report ---------------------------------------------------------------------------------------

function table(head: string[], rows: string[][], align: ('l' | 'r')[]): string {
  const sep = align.map((a) => (a === 'r' ? '---:' : '---'))
  return [head, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n')
}
const med = (f: Framework, v: Variant, pick: (m: Measured) => number) =>
  median(results.get(`${f}/${v}`)!.map(pick))
const rps = (f: Framework, v: Variant) => med(f, v, (m) => m.run.rps)
/**
 * The median over rounds of a ratio taken within each round: the two runs of a round are seconds apart,
 * so a change of load on the shared machine between rounds cancels out (a ratio of medians would not).
 */
const ratio = (f: Framework, a: Variant, b: Variant) => {
  const as = results.get(`${f}/${a}`)!
  const bs = results.get(`${f}/${b}`)!
  return median(as.map((m, r) => m.run.rps / bs[r]!.run.rps))
}
/** CPU microseconds per request, all three processes: what a request costs the machine. */
const cpuOf = (m: Measured) => m.serverUs + m.redisUs + m.clientUs
const times = (x: number) => `${x.toFixed(2)}×`
const label: Record<Variant, (f: Framework) => string> = {
  bare: () => 'bare (no limiter)',
  tollgate: () => 'Tollgate',
  peer: (f) => limiterNames.get(`${f}/peer`) ?? 'peer',
  refused: () => 'Tollgate, refused client (deny cache)',
  'tollgate-10k': () => `Tollgate, ${IDENTITIES.toLocaleString('en-US')} identities (key function)`,
  'peer-10k': (f) =>
    `${limiterNames.get(`${f}/peer`) ?? 'peer'}, ${IDENTITIES.toLocaleString('en-US')} identities (keyGenerator)`,
}

const rows: string[][] = []
for (const f of frameworks) {
  for (const v of VARIANTS) {
    const all = results.get(`${f}/${v}`)!
    const statuses: Record<string, number> = {}
    for (const m of all)
      for (const [c, n] of Object.entries(m.run.statuses)) statuses[c] = (statuses[c] ?? 0) + n
    const fallbacks = all.reduce((s, m) => s + m.events.fallback, 0)
    const xs = all.map((m) => m.run.rps)
    rows.push([
      f,
      label[v](f) + (fallbacks ? ` ⚠ ${fallbacks} fallbacks` : ''),
      `**${fmtInt(rps(f, v))}**`,
      `${fmtInt(Math.min(...xs))}–${fmtInt(Math.max(...xs))}`,
      v === 'bare' ? '1.00×' : times(ratio(f, v, 'bare')),
      fmtMs(med(f, v, (m) => m.run.p50Ms)),
      fmtMs(med(f, v, (m) => m.run.p99Ms)),
      med(f, v, (m) => m.serverUs).toFixed(0),
      med(f, v, (m) => m.redisUs).toFixed(0),
      med(f, v, (m) => m.clientUs).toFixed(0),
      med(f, v, cpuOf).toFixed(0),
      med(f, v, (m) => m.redisPerRequest).toFixed(2),
      formatStatuses(statuses),
    ])
  }
}
const mainTable = table(
  [
    'Framework',
    'Limiter',
    'req/s (median)',
    'min–max',
    'vs bare',
    'p50 ms',
    'p99 ms',
    'server CPU µs/req',
    'Redis CPU µs/req',
    'autocannon CPU µs/req',
    'total CPU µs/req',
    'Redis cmds/req',
    'responses (all rounds)',
  ],
  rows,
  ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
)
const ratioTable = table(
  [
    'Framework',
    'Tollgate / bare',
    'peer / bare',
    'Tollgate / peer',
    'min–max over rounds',
    'Tollgate / peer by CPU per request',
    `Tollgate / peer, ${IDENTITIES.toLocaleString('en-US')} identities`,
    `min–max over rounds, ${IDENTITIES.toLocaleString('en-US')} identities`,
    'refused (deny cache) / bare',
  ],
  frameworks.map((f) => {
    const perRound = results
      .get(`${f}/tollgate`)!
      .map((m, r) => m.run.rps / results.get(`${f}/peer`)![r]!.run.rps)
    const perRound10k = results
      .get(`${f}/tollgate-10k`)!
      .map((m, r) => m.run.rps / results.get(`${f}/peer-10k`)![r]!.run.rps)
    return [
      f,
      times(ratio(f, 'tollgate', 'bare')),
      times(ratio(f, 'peer', 'bare')),
      `**${times(ratio(f, 'tollgate', 'peer'))}**`,
      `${times(Math.min(...perRound))}–${times(Math.max(...perRound))}`,
      times(med(f, 'peer', cpuOf) / med(f, 'tollgate', cpuOf)),
      `**${times(ratio(f, 'tollgate-10k', 'peer-10k'))}**`,
      `${times(Math.min(...perRound10k))}–${times(Math.max(...perRound10k))}`,
      times(ratio(f, 'refused', 'bare')),
    ]
  }),
  ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
)

/** The commit measured, and whether the packages had uncommitted changes (a benchmark of work in progress). */
function revision(): string {
  try {
    const git = (args: string[]) => execFileSync('git', args, { cwd: HERE, encoding: 'utf8' }).trim()
    const head = git(['rev-parse', '--short', 'HEAD'])
    const dirty = git(['status', '--porcelain', '--', '../packages']) !== ''
    return dirty ? `${head} + uncommitted changes in packages/` : head
  } catch {
    return 'unknown (not a git checkout)'
  }
}

const cpus = os.cpus()
const seconds = ((Date.now() - t0) / 1000).toFixed(0)
const loadAvg = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' ')
const report = `## HTTP benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? '?'} (shared: autocannon, the server process and redis-server compete for
it), load average ${loadAvg(load0)} at start, ${loadAvg(os.loadavg())} at end. Node ${process.version}, ${TOLLGATE_BUILD}, redis-server
${redisVersion} (fresh, no persistence). express ${versionOf('express')}, fastify ${versionOf('fastify')}, hono ${versionOf('hono')} on
@hono/node-server ${versionOf('@hono/node-server')}; express-rate-limit ${versionOf('express-rate-limit')} + rate-limit-redis ${versionOf('rate-limit-redis')}, @fastify/rate-limit
${versionOf('@fastify/rate-limit')} (ioredis ${versionOf('ioredis')}), hono-rate-limiter ${versionOf('hono-rate-limiter')}; node-redis ${versionOf('redis')}.
autocannon ${versionOf('autocannon')}: ${CONNECTIONS} connections, one request in flight each, \`GET ${PATH}\`; each server in its own
process. ${WARMUP_S} s warm-up per variant, then ${ROUNDS} rounds × ${DURATION_S} s per variant, in turn (bare, Tollgate, peer,
refused, Tollgate and peer keyed on \`${IDENTITY_HEADER}\` with ${IDENTITIES.toLocaleString('en-US')} identities, …); median shown. Tollgate on the peer's
client library (ioredis on Fastify, node-redis on Express and Hono). Limit ${HIGH_LIMIT.toLocaleString('en-US')} per ${HIGH_WINDOW_MS / 1000} s for Tollgate and the peers (nothing refused);
the refused row: Tollgate with limit 1 per ${REFUSED_WINDOW_MS / 3_600_000} h, one client. Commit ${revision()}. Run took ${seconds} s.

### Requests per second

${mainTable}

### Ratios

Each ratio is the median over rounds of the ratio within a round (the runs of one round are seconds apart).
"by CPU per request": the peer's total CPU per request over Tollgate's (above 1: Tollgate costs the machine
less per request); it depends less on what else ran on the machine than requests per second do.

${ratioTable}

"responses": every response of the measured rounds by status; a run with any other status (or a connection
error) stops the benchmark. "vs bare": the median over rounds of the ratio within a round. "CPU µs/req":
CPU time (user + system) per response of the server process (\`process.cpuUsage()\`), of redis-server
(INFO \`used_cpu_user\` + \`used_cpu_sys\`) and of autocannon, over the run, and their sum. "Redis
cmds/req": commands redis-server processed per response (INFO \`total_commands_processed\`, which counts an
EVALSHA and each \`redis.call\` its script makes). Latency is autocannon's, in whole milliseconds, with
${CONNECTIONS} requests in flight (mostly queueing). On two shared cores the three processes take CPU from each
other (their CPU per request adds up to what a request costs the machine), so absolute figures are low
and noisy: compare the ratios within one run, and the CPU per request, which depends less on what else
runs on the machine.
`

process.stdout.write(`\n${report}`)
const out = process.env.BENCH_HTTP_OUT ?? reportPath('http')
if (out !== '-') {
  writeResults(out, report, 'http')
  log(`\nwritten to ${path.relative(process.cwd(), out)}`)
}
