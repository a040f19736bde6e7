/**
 * What reading an identity's control key (blocks, allow entries, overrides) and the pattern version key
 * costs Redis per decision, A/B in one run: the lone-call and batch scripts of a baseline revision
 * against this tree's, each sent as its RedisStore sends them (the pair key, then the identity's control
 * key, then, where the scripts read one, the pattern version key and the call's pattern tail), with
 * nothing stored; then this tree's with an override stored, and with a pattern matched, which the script
 * parses and applies.
 *
 * `node --import tsx benchmarks/control-cost.mts <baseline-rev> [rounds]` (median of `rounds`, default 5;
 * rows alternate A and B in every round). Redis main-thread CPU (INFO cpu) per decision while
 * `redis-benchmark -c 50 -P 16` keeps Redis busy, as benchmarks/script-cost.mts measures. Prints a markdown
 * table and writes it under `benchmarks/results/control-cost-<date>.md` (`BENCH_OUT` elsewhere or `-`).
 * @module
 */
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import * as current from '@tollgate/core/scripts'
import { createClient } from 'redis'
import { median } from './lib/measure'
import { redisCpuUs } from './lib/redis-cpu'
import { startBenchRedis } from './lib/redis-server'
import { reportPath } from './lib/results'

const here = path.dirname(fileURLToPath(import.meta.url))
const BASE = process.argv[2]
if (!BASE) throw new Error('usage: control-cost.mts <baseline-rev> [rounds]')
const ROUNDS = Number(process.argv[3] ?? 5)
const DECISIONS = 400_000

// the baseline's generated scripts, read from git (a self-contained module of strings)
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'control-cost-'))
const baseFile = path.join(tmp, 'generated.ts')
fs.writeFileSync(
  baseFile,
  execFileSync('git', ['show', `${BASE}:packages/core/src/scripts/generated.ts`], {
    cwd: here,
    maxBuffer: 1 << 26,
  }),
)
const baseline = (await import(pathToFileURL(baseFile).href)) as typeof current
const baseRev = execFileSync('git', ['rev-parse', '--short', BASE], { cwd: here }).toString().trim()

const redis = await startBenchRedis()
const client = await createClient({ url: redis.url }).connect()

const SW = current.ALGORITHM_CODES['sliding-window']
const POLICY = [String(SW), '1000000', '60000', '1000000'] // a limit no round reaches, 60 s
// pair and control keys as keys.ts builds them (`{identity}` tag); random identities or one hot one
const pair = (id: string) => `cc:{${id}}:sw-1m`
const control = (id: string) => `cc:{${id}}:~c`
const VERSION = 'cc:{~c}:pver'
// whether a revision's scripts take the pattern tail (lua/includes/pattern.lua), as its store then sends
const patterned = (scripts: typeof current) => scripts.BY_ALGORITHM[SW]!.consume.source.includes('== 126')

interface Row {
  readonly name: string
  readonly source: string
  readonly args: readonly string[]
  readonly decisions: number
}
const lone = (side: string, scripts: typeof current, id: string, tail = '~0'): Row => ({
  name: `${side}: lone call, ${id === 'hot' ? 'one identity' : '10,000 identities'}`,
  source: scripts.BY_ALGORITHM[SW]!.consume.source,
  args: patterned(scripts)
    ? ['3', pair(id), control(id), VERSION, '1', ...POLICY, tail]
    : ['2', pair(id), control(id), '1', ...POLICY],
  decisions: 1,
})
const batch = (side: string, scripts: typeof current, n: number): Row => ({
  name: `${side}: batch of ${n}, 10,000 identities`,
  source: scripts.BY_ALGORITHM[SW]!.batch.source,
  // the control keys first ('~'), then one run of one-pair consumes, as the batcher sends them
  args: [
    String(2 * n + (patterned(scripts) ? 1 : 0)),
    ...(patterned(scripts) ? [VERSION] : []),
    ...Array.from({ length: n }, (_, i) => control(`__rand_int__${i}`)),
    ...Array.from({ length: n }, (_, i) => pair(`__rand_int__${i}`)),
    ...(patterned(scripts) ? ['v', '0'] : []),
    '~',
    String(n),
    '#',
    ...POLICY,
    'x',
    '1',
    '1',
    String(n),
  ],
  decisions: n,
})
const A = `A ${baseRev}`
const B = 'B this tree'
const rows: Row[] = [
  lone(A, baseline, '__rand_int__'),
  lone(B, current, '__rand_int__'),
  lone(A, baseline, 'hot'),
  lone(B, current, 'hot'),
  { ...lone(B, current, 'hot'), name: `${B}: lone call, one identity with an override stored` },
  {
    ...lone(B, current, 'hot', '~1;0|=60000000'),
    name: `${B}: lone call, one identity under a pattern`,
  },
  batch(A, baseline, 16),
  batch(B, current, 16),
]

const cpuUs = () => redisCpuUs(client)

const perDecision = new Map<string, number[]>(rows.map((r) => [r.name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const row of rows) {
    await client.sendCommand(['FLUSHALL'])
    if (row.name.includes('override')) {
      // an override of 60,000,000 (no end): parsed and applied on every call
      await client.hSet(control('hot'), 'o', '0|=60000000')
    }
    // a pattern the process matched (version 1, as stored), its value in the call's tail
    if (row.name.includes('pattern')) await client.set(VERSION, '1')
    const sha = String(await client.sendCommand(['SCRIPT', 'LOAD', row.source]))
    const calls = Math.round(DECISIONS / row.decisions)
    const before = await cpuUs()
    execFileSync('redis-benchmark', [
      ...['-p', String(redis.port), '-c', '50', '-P', '16', '-n', String(calls), '-r', '10000', '-q'],
      ...['EVALSHA', sha, ...row.args],
    ])
    const used = (await cpuUs()) - before
    perDecision.get(row.name)!.push(used / calls / row.decisions)
  }
}

const started = new Date().toISOString()
const cpus = os.cpus()
const us = (name: string) => median(perDecision.get(name)!)
const lines = [
  `## Control key cost, ${started.slice(0, 16).replace('T', ' ')} UTC`,
  '',
  `Machine: ${cpus.length} × ${cpus[0]?.model.split(' ').slice(0, 2).join(' ') ?? 'unknown CPU'}, Node ${process.version}; ` +
    `\`node --import tsx benchmarks/control-cost.mts ${BASE} ${ROUNDS}\` (A = ${baseRev}).`,
  '',
  `Redis ${String(await client.sendCommand(['INFO', 'server'])).match(/redis_version:(\S+)/)?.[1]}, ` +
    `redis-benchmark -c 50 -P 16, sliding window, median of ${ROUNDS} rounds`,
  '',
  '| Script | Redis CPU µs per decision |',
  '| --- | ---: |',
  ...rows.map((r) => `| ${r.name} | ${us(r.name).toFixed(2)} |`),
]
const report = `${lines.join('\n')}\n`
process.stdout.write(report)
const out = reportPath('control-cost')
if (out !== '-') fs.writeFileSync(out, report)
fs.rmSync(tmp, { recursive: true, force: true })
await client.quit()
await redis.stop()
