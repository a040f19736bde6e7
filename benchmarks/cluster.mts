/**
 * One node vs a 3-primary Redis Cluster, same run (`node --import tsx benchmarks/cluster.mts`):
 * decisions/s of `RateLimiter.consume()` on node-redis (`createClient` vs `createCluster`), 256 calls in
 * flight, the default algorithm (sliding-window), 10,000 keys round-robin, everything admitted; plus a
 * two-policy limiter keyed on two identities (ip + account), whose keys live in different slots on the
 * cluster (one script per slot, in parallel) and in one script on the single node.
 *
 * Starts its own redis-servers on free ports (one plain, three cluster-enabled joined with
 * `redis-cli --cluster create`), no persistence, killed on exit. Variants are interleaved per round
 * (1 node, cluster, 1 node, cluster...) and the table shows the median over rounds.
 *
 * Knobs (env): BENCH_DURATION_MS (1500), BENCH_ROUNDS (3), BENCH_WARMUP_MS (500), BENCH_CONCURRENCY (256),
 * BENCH_OUT (results file; '-' = none), BENCH_ONLY (variant ids, comma-separated: `3-primary cluster-1`).
 */
import { execFile } from 'node:child_process'
import net from 'node:net'
import os from 'node:os'
import { promisify } from 'node:util'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { createClient, createCluster } from 'redis'
import { type Measurement, measure, median, type Op, outcomeOf } from './lib/measure'
import { type BenchRedis, freePort, startBenchRedis } from './lib/redis-server'
import { reportPath, writeResults } from './lib/results'

const run = promisify(execFile)
const env = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt)
const DURATION_MS = env('BENCH_DURATION_MS', 1500)
const ROUNDS = env('BENCH_ROUNDS', 3)
const WARMUP_MS = env('BENCH_WARMUP_MS', 500)
const CONCURRENCY = env('BENCH_CONCURRENCY', 256)
const KEYSPACE = 10_000
const LIMIT = 1_000_000
const log = (s: string) => process.stderr.write(`${s}\n`)
const t0 = Date.now()
const load0 = os.loadavg()

// ---- servers --------------------------------------------------------------------------------------

/** One RESP command over a fresh socket (admin only: INFO, CLUSTER INFO). */
function command(port: number, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1')
    let buf = ''
    sock.setTimeout(2000, () => sock.destroy(new Error('timeout')))
    sock.once('error', reject)
    sock.once('connect', () =>
      sock.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`),
    )
    sock.on('data', (d) => {
      buf += d
      const m = /^\$(\d+)\r\n/.exec(buf)
      if (m && buf.length >= m[0].length + Number(m[1]) + 2) {
        sock.destroy()
        resolve(buf.slice(m[0].length, m[0].length + Number(m[1])))
      }
    })
  })
}

async function startCluster(): Promise<BenchRedis[]> {
  const nodes: BenchRedis[] = []
  for (let i = 0; i < 3; i++) {
    // an explicit bus port: the default (port + 10000) overflows above 55535
    const bus = await freePort()
    nodes.push(
      await startBenchRedis([
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-port',
        String(bus),
      ]),
    )
  }
  await run('redis-cli', [
    '--cluster',
    'create',
    ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  ])
  const deadline = Date.now() + 20_000
  for (;;) {
    const states = await Promise.all(nodes.map((n) => command(n.port, ['CLUSTER', 'INFO'])))
    if (states.every((s) => s.includes('cluster_state:ok') && s.includes('cluster_known_nodes:3')))
      return nodes
    if (Date.now() > deadline) throw new Error(`cluster did not converge:\n${states.join('\n')}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const single = await startBenchRedis()
const clusterNodes = await startCluster()
const redisVersion = /redis_version:(\S+)/.exec(await command(single.port, ['INFO', 'server']))?.[1] ?? '?'
log(
  `redis-server ${redisVersion}: one node on ${single.port}, cluster on ${clusterNodes.map((n) => n.port).join(', ')}`,
)

const oneNode = await createClient({ url: single.url, commandOptions: { timeout: 0 } })
  .on('error', (e) => log(`node-redis error: ${e}`))
  .connect()
const cluster = await createCluster({ rootNodes: clusterNodes.map((n) => ({ url: n.url })) })
  .on('error', (e) => log(`node-redis cluster error: ${e}`))
  .connect()

// ---- variants -------------------------------------------------------------------------------------

const KEYS = Array.from({ length: KEYSPACE }, (_, n) => `user:${n}`)
const ACCOUNTS = Array.from({ length: KEYSPACE }, (_, n) => `email:u${(n * 7919) % KEYSPACE}@example.com`)

interface Variant {
  id: string
  label: string
  where: '1 node' | '3-primary cluster'
  op: Op
}

function variant(where: Variant['where'], policies: 1 | 2): Variant {
  const store = new RedisStore(where === '1 node' ? oneNode : cluster)
  const common = { store, prefix: `bc${policies}`, timeoutMs: 5_000 } as const
  const limiter =
    policies === 1
      ? new RateLimiter({ ...common, limit: LIMIT, window: '1m' })
      : new RateLimiter({
          ...common,
          policies: { ip: { limit: LIMIT, window: '1m' }, account: { limit: LIMIT, window: '1m' } },
        })
  const key =
    policies === 1
      ? (i: number) => KEYS[i % KEYSPACE]!
      : (i: number) => ({ ip: KEYS[i % KEYSPACE]!, account: ACCOUNTS[i % KEYSPACE]! })
  return {
    id: `${where}-${policies}`,
    label: policies === 1 ? 'one policy, one key' : 'two policies, two identities (2 slots on the cluster)',
    where,
    op: (i) => limiter.consume(key(i)).then(outcomeOf),
  }
}

// BENCH_ONLY: a comma-separated list of variant ids (`1 node-1`, `3-primary cluster-2`, ...) to run only those,
// e.g. under --cpu-prof
const only = process.env.BENCH_ONLY?.split(',')
const variants: Variant[] = [
  variant('1 node', 1),
  variant('3-primary cluster', 1),
  variant('1 node', 2),
  variant('3-primary cluster', 2),
].filter((v) => !only || only.includes(v.id))
const runs = new Map<string, Measurement[]>(variants.map((v) => [v.id, []]))
/** CPU time of this Node process per decision, µs (user + system): the client's share of the work. */
const cpuPerDecision = new Map<string, number[]>(variants.map((v) => [v.id, []]))

log(`warm-up: ${variants.length} variants x ${WARMUP_MS} ms`)
for (const v of variants) await measure(v.op, { concurrency: CONCURRENCY, durationMs: WARMUP_MS })
for (let round = 1; round <= ROUNDS; round++) {
  log(`round ${round}/${ROUNDS}`)
  for (const v of variants) {
    const cpu0 = process.cpuUsage()
    const m = await measure(v.op, { concurrency: CONCURRENCY, durationMs: DURATION_MS })
    const cpu = process.cpuUsage(cpu0)
    runs.get(v.id)!.push(m)
    cpuPerDecision.get(v.id)!.push((cpu.user + cpu.system) / Math.max(1, m.decisions))
    log(
      `  ${`${v.where}, ${v.label}`.padEnd(72)} ${fmtInt(m.perSecond).padStart(7)}/s  fallbacks ${m.fallbacks} errors ${m.errors}`,
    )
  }
}

await oneNode.quit()
await cluster.close()
await Promise.all([single, ...clusterNodes].map((n) => n.stop()))

// ---- report ---------------------------------------------------------------------------------------

function fmtInt(x: number): string {
  return Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '—'
}
const med = (v: Variant, f: (m: Measurement) => number) => median(runs.get(v.id)!.map(f))
const rows = variants.map((v) => {
  const all = runs.get(v.id)!
  const base = variants.find((b) => b.where === '1 node' && b.label === v.label) // absent under BENCH_ONLY
  const problems = all.reduce((n, m) => n + m.errors + m.fallbacks, 0)
  return [
    v.label,
    v.where,
    `**${fmtInt(med(v, (m) => m.perSecond))}**`,
    `${fmtInt(Math.min(...all.map((m) => m.perSecond)))}–${fmtInt(Math.max(...all.map((m) => m.perSecond)))}`,
    v === base
      ? '1.00×'
      : base
        ? `${(med(v, (m) => m.perSecond) / med(base, (m) => m.perSecond)).toFixed(2)}×`
        : '—',
    median(cpuPerDecision.get(v.id)!).toFixed(0),
    med(v, (m) => m.p50Ms).toFixed(1),
    med(v, (m) => m.p99Ms).toFixed(1),
    problems ? `${problems} ⚠` : '0',
  ]
})
const table = [
  [
    'Limiter',
    'Redis',
    'decisions/s (median)',
    'min–max',
    'vs 1 node',
    'Node CPU µs / decision',
    'p50 ms',
    'p99 ms',
    'errors + fallbacks',
  ],
  ['---', '---', '---:', '---:', '---:', '---:', '---:', '---:', '---:'],
  ...rows,
]
  .map((r) => `| ${r.join(' | ')} |`)
  .join('\n')
const cpus = os.cpus()
const report = `## Cluster benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? '?'} (shared: Node, the single redis-server and the three cluster
primaries all compete for it), load average ${load0.map((x) => x.toFixed(2)).join(' ')} at start, ${os
  .loadavg()
  .map((x) => x.toFixed(2))
  .join(
    ' ',
  )} at end. Node ${process.version}, redis-server ${redisVersion} (fresh, no persistence), node-redis 6.3.1
(\`createClient\`: one connection; \`createCluster\`: one connection per primary). Sliding-window (the default),
limit ${LIMIT.toLocaleString('en-US')} per minute (everything admitted), ${KEYSPACE.toLocaleString('en-US')} keys round-robin, ${CONCURRENCY} calls
in flight; ${WARMUP_MS} ms warm-up per variant, then ${ROUNDS} rounds × ${DURATION_MS} ms, interleaved; median shown. Run took
${((Date.now() - t0) / 1000).toFixed(0)} s.

${table}

"two policies, two identities": \`consume({ ip, account })\` with two different identities. On one node it is
one script; on the cluster the two keys hash to different slots (almost always on different primaries), so
it is two scripts in parallel, one per slot (docs/cluster.md). "Node CPU µs / decision": user + system CPU
time of the benchmark's Node process over the run, per decision: the client-side cost (Tollgate, node-redis,
the sockets); the rest of the machine runs the redis-servers.
`
process.stdout.write(`${report}\n`)
const out = reportPath('cluster')
if (out !== '-') {
  writeResults(out, report, 'cluster')
  log(`written to ${out}`)
}
