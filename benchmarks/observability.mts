/**
 * What observability costs: decisions/s of `RateLimiter.consume()` with no subscriber on Tollgate's
 * diagnostics channels, with `@tollgate/prometheus` collecting, and with `@tollgate/opentelemetry`
 * recording into an SDK MeterProvider, in the same run, interleaved (A B C A B C ...), median of rounds.
 * Two stores: RedisStore on a fresh redis-server (node-redis v6, what production pays), and MemoryStore
 * (no network: the collector's CPU cost shows undiluted).
 *
 * Run: `pnpm build && pnpm bench:run benchmarks/observability.mts` (Tollgate's build, lib/build.ts; knobs: BENCH_DURATION_MS 1500, BENCH_ROUNDS 5,
 * BENCH_CONCURRENCY 256, BENCH_OUT results file or '-').
 */
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { MemoryStore, RateLimiter, RedisStore, type Store } from '@tollgate/core'
import { instrumentTollgate } from '@tollgate/opentelemetry'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import { Registry } from 'prom-client'
import { createClient } from 'redis'
import { runsBuild, TOLLGATE_BUILD } from './lib/build'
import { measure, median, outcomeOf } from './lib/measure'
import { startBenchRedis } from './lib/redis-server'
import { writeResults } from './lib/results'

const env = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt)
const DURATION_MS = env('BENCH_DURATION_MS', 1500)
const ROUNDS = env('BENCH_ROUNDS', 5)
const CONCURRENCY = env('BENCH_CONCURRENCY', 256)
const KEYS = 10_000
const log = (s: string) => process.stderr.write(`${s}\n`)
const load0 = os.loadavg()

const redis = await startBenchRedis()
const client = await createClient({ url: redis.url })
  .on('error', (e) => log(`node-redis error: ${e}`))
  .connect()

type Mode = 'off' | 'prometheus' | 'opentelemetry'
const MODES: Mode[] = ['off', 'prometheus', 'opentelemetry']

/** Turns a collector on for one measurement; returns its stop(). 'off' subscribes nothing. */
function enable(mode: Mode): () => Promise<void> {
  if (mode === 'prometheus') {
    const metrics = collectTollgateMetrics({ registry: new Registry() })
    return async () => metrics.stop()
  }
  if (mode === 'opentelemetry') {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    })
    const meterProvider = new MeterProvider({ readers: [reader] })
    const inst = instrumentTollgate({ meterProvider, spanAttributes: false })
    return async () => {
      inst.stop()
      await meterProvider.shutdown()
    }
  }
  return async () => {}
}

// A MemoryStore per variant: one store for all would fill up (each variant has its own prefix, so its
// own 10,000 keys) and a full MemoryStore refuses new keys, which the limiter answers by its failure
// policy, not a decision.
const redisStore = new RedisStore(client)
const stores: Array<[string, () => Store]> = [
  ['RedisStore (node-redis)', () => redisStore],
  ['MemoryStore', () => new MemoryStore({ maxKeys: 2 * KEYS })],
]
const results = new Map<string, number[]>()
for (let round = 0; round <= ROUNDS; round++) {
  for (const [storeName, store] of stores) {
    for (const mode of MODES) {
      // Round 0 warms up every variant (JIT, connections, keys) and is not counted.
      const limiter = new RateLimiter({
        store: store(),
        name: 'bench',
        prefix: `obs-${round}-${mode}`,
        limit: 1_000_000,
        window: '1m',
      })
      const stop = enable(mode)
      const m = await measure(async (i) => outcomeOf(await limiter.consume(`k${i % KEYS}`)), {
        concurrency: CONCURRENCY,
        durationMs: round === 0 ? 500 : DURATION_MS,
      })
      await stop()
      if (m.errors > 0) throw m.firstError
      if (m.fallbacks > 0) throw new Error(`${storeName} ${mode}: ${m.fallbacks} failure-policy answers`)
      if (round === 0) continue
      const id = `${storeName}\t${mode}`
      results.set(id, [...(results.get(id) ?? []), m.perSecond])
      log(`round ${round} ${storeName} ${mode}: ${Math.round(m.perSecond)}/s`)
    }
  }
}

const lines: string[] = []
lines.push(`# Observability overhead (${new Date().toISOString().slice(0, 10)})`)
lines.push('')
lines.push(
  `Command: \`${runsBuild ? 'pnpm build && pnpm bench:run' : 'node --import tsx'} benchmarks/observability.mts\`; ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), ` +
    `Node ${process.version}, ${TOLLGATE_BUILD}, load average at start ${load0.map((l) => l.toFixed(1)).join(' ')}; ` +
    `${CONCURRENCY} calls in flight, ${KEYS} keys round-robin, sliding window, all admitted; ` +
    `median of ${ROUNDS} rounds of ${DURATION_MS} ms, variants interleaved.`,
)
lines.push('')
lines.push('| store | collector | decisions/s (median) | vs no collector |')
lines.push('|---|---|---:|---:|')
for (const [storeName] of stores) {
  const base = median(results.get(`${storeName}\toff`)!)
  for (const mode of MODES) {
    const v = median(results.get(`${storeName}\t${mode}`)!)
    lines.push(
      `| ${storeName} | ${mode === 'off' ? 'none (no subscriber)' : `@tollgate/${mode}`} | ${Math.round(v).toLocaleString('en-US')} | ${(v / base).toFixed(2)} |`,
    )
  }
}
const table = lines.join('\n')
process.stdout.write(`${table}\n`)
const out =
  process.env.BENCH_OUT ??
  path.join(
    path.dirname(fileURLToPath(import.meta.url)),
    'results',
    `observability-${new Date().toISOString().slice(0, 10)}.md`,
  )
if (out !== '-') writeResults(out, `${table}\n`, 'observability')
await client.quit()
await redis.stop()
