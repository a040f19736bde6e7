/**
 * What the commands of a found counter cost Redis, a key each against a compact bucket, with no client
 * and no script around them: one Lua loop (repeated to a million operations) runs `INCRBY` (a spend's
 * one command) or `GET` + `INCRBY` on N string keys, or `HINCRBY` or `HGET` + `HINCRBY` on N fields
 * spread over 8,192 listpack hashes (compact storage's buckets per policy), and Redis' main-thread CPU over the loop is divided by the operations. The loop's own work (building the names) is
 * measured alone and taken off. A bucket's field is found by scanning its listpack, and the write scans
 * it again: the difference is what a fuller bucket costs each decision.
 *
 * `node --import tsx benchmarks/compact-commands.mts`; knobs (env): BENCH_SCALES (10000,100000,1000000),
 * BENCH_ROUNDS (median of; 5), BENCH_OUT (default benchmarks/results/compact-commands-<date>.md; '-' =
 * none).
 * @module
 */
import fs from 'node:fs'
import os from 'node:os'
import { createClient } from 'redis'
import { median } from './lib/measure'
import { redisCpuUs, startBenchRedis } from './lib/redis-server'
import { reportPath } from './lib/results'

const SCALES = (process.env.BENCH_SCALES ?? '10000,100000,1000000').split(',').map(Number)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const BUCKETS = 8192
const t0 = Date.now()

const redis = await startBenchRedis()
const client = await createClient({ url: redis.url }).connect()
const send = (args: string[]) => client.sendCommand(args)

// names as the layouts build them: a key each `t:{<identity>}:sw-1m`; compact, a field of 9 characters
// in bucket `t:{~h:c<bucket>}sw-1m`
const KEY = "local k = 't:{' .. i .. '}:sw-1m'"
const SPOT = `local k, f = 't:{~h:c' .. (i % ${BUCKETS}) .. '}sw-1m', string.format('f%08d', i)`
const LOOPS: Record<string, string> = {
  'names of a key each (the loop alone)': KEY,
  'GET + INCRBY (a key each)': `${KEY}; redis.call('GET', k); redis.call('INCRBY', k, 1)`,
  'names of a compact field (the loop alone)': SPOT,
  'HGET + HINCRBY (compact)': `${SPOT}; redis.call('HGET', k, f); redis.call('HINCRBY', k, f, 1)`,
  'HGET (compact)': `${SPOT}; redis.call('HGET', k, f)`,
  'GET (a key each)': `${KEY}; redis.call('GET', k)`,
  'INCRBY (a key each)': `${KEY}; redis.call('INCRBY', k, 1)`,
  'HINCRBY (compact)': `${SPOT}; redis.call('HINCRBY', k, f, 1)`,
}
const loop = (body: string) => `for i = 1, tonumber(ARGV[1]) do ${body} end`
// at least a million operations per reading: a short loop is below what INFO cpu resolves
const passes = (n: number) => Math.ceil(1_000_000 / n)
const loops = (body: string) =>
  `for _ = 1, tonumber(ARGV[2]) do for i = 1, tonumber(ARGV[1]) do ${body} end end`

const perOp = new Map<string, number>()
const fields = new Map<number, number>()
for (const n of SCALES) {
  await client.flushAll()
  await client.eval(loop("redis.call('SET', 't:{' .. i .. '}:sw-1m', 5, 'PX', 600000)"), {
    arguments: [String(n)],
  })
  await client.eval(
    `${loop(`${SPOT}; redis.call('HSET', k, f, 5)`)} for b = 0, ${BUCKETS - 1} do redis.call('PEXPIRE', 't:{~h:c' .. b .. '}sw-1m', 600000) end`,
    { arguments: [String(n)] },
  )
  fields.set(n, Number(await client.hLen('t:{~h:c1}sw-1m')))
  for (const [what, body] of Object.entries(LOOPS)) {
    const runs: number[] = []
    for (let r = 0; r < ROUNDS; r++) {
      const before = await redisCpuUs(send)
      await client.eval(loops(body), { arguments: [String(n), String(passes(n))] })
      runs.push(((await redisCpuUs(send)) - before) / (n * passes(n)))
    }
    perOp.set(`${what}@${n}`, median(runs))
  }
  const encoding = await client.objectEncoding('t:{~h:c1}sw-1m')
  process.stderr.write(`${n}: ${fields.get(n)} fields per bucket (${encoding})\n`)
}
const serverVersion = /redis_version:([^\r\n]+)/.exec(await client.info('server'))![1]
await client.quit()
await redis.stop()

const at = (what: string, n: number) => perOp.get(`${what}@${n}`)!
const count = (n: number) => n.toLocaleString('en-US')
const rows = SCALES.map((n) => {
  const keys = at('GET + INCRBY (a key each)', n) - at('names of a key each (the loop alone)', n)
  const compact = at('HGET + HINCRBY (compact)', n) - at('names of a compact field (the loop alone)', n)
  const get = at('GET (a key each)', n) - at('names of a key each (the loop alone)', n)
  const hget = at('HGET (compact)', n) - at('names of a compact field (the loop alone)', n)
  const incr = at('INCRBY (a key each)', n) - at('names of a key each (the loop alone)', n)
  const hincr = at('HINCRBY (compact)', n) - at('names of a compact field (the loop alone)', n)
  return `| ${count(n)} | ${fields.get(n)} | ${get.toFixed(2)} | ${hget.toFixed(2)} | ${incr.toFixed(2)} | ${hincr.toFixed(2)} | ${(hincr / incr).toFixed(2)}x | ${keys.toFixed(2)} | ${compact.toFixed(2)} | ${(compact / keys).toFixed(2)}x |`
})
const cpus = os.cpus()
const report = `## Compact commands at scale, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC

Command: \`node --import tsx benchmarks/compact-commands.mts\` (BENCH_SCALES=${SCALES.join(',')}, BENCH_ROUNDS=${ROUNDS}); ${((Date.now() - t0) / 1000).toFixed(0)} s.
Machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, Node ${process.version}, Redis ${serverVersion} (spawned, no persistence).

N identities' counters stored, then one Lua loop over all N (repeated to a million operations) runs the commands of a found
counter; Redis main-thread CPU (INFO cpu) over the loop, divided by the operations, median of ${ROUNDS} loops, less the same loop building the names alone. Compact: ${count(BUCKETS)} listpack
hashes, fields of 9 characters. µs per decision.

A spend of a counter found with counts sends INCRBY alone (a key each) or HINCRBY alone (compact); the read-then-write pairs are the older path.

| identities | fields per bucket | GET | HGET | INCRBY | HINCRBY | HINCRBY / INCRBY | GET + INCRBY | HGET + HINCRBY | compact / a key each |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows.join('\n')}
`
process.stdout.write(report)
const out = reportPath('compact-commands')
if (out !== '-') fs.writeFileSync(out, report)
