/**
 * Tollgate on the edge against `@upstash/ratelimit`, same run (`node --import tsx benchmarks/edge.mts`):
 *
 * 1. Workers bundle: the same job (Hono, a limit per CF-Connecting-IP, headers, 429) built with
 *    `@tollgate/core` + `@tollgate/hono` and with `@upstash/ratelimit` + hand-written Hono wiring (it ships
 *    no middleware), both on `@upstash/redis/cloudflare`, bundled by esbuild for workerd and minified as
 *    wrangler deploys; raw and gzip bytes, plus a Hono + @upstash/redis worker with no limiter (the floor).
 * 2. Cold start in workerd: a fresh workerd process per sample, timed from spawn to the port accepting
 *    (module load and evaluation), and the first request through the limiter (app built lazily, first
 *    REST round trip); median of BENCH_COLD samples, interleaved.
 * 3. Decisions per second and REST requests per decision in Node, each library's own call
 *    (`limiter.consume(key)` / `ratelimit.limit(key)`) on `@upstash/redis` through the testkit's Upstash
 *    REST server in front of a fresh redis-server: sliding window for both, everything admitted,
 *    10,000 keys round-robin, BENCH_CONCURRENCY calls in flight, interleaved rounds, median shown.
 *
 * Knobs (env): BENCH_DURATION_MS (2000), BENCH_ROUNDS (3), BENCH_WARMUP_MS (500), BENCH_CONCURRENCY (64),
 * BENCH_COLD (5), BENCH_OUT (results file; '-' = none).
 */
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { Ratelimit } from '@upstash/ratelimit'
import { Redis } from '@upstash/redis'
import { bundleWorker, startWorkerd, type WorkerBundle } from '../packages/testkit/src/edge-runtimes'
import { startRedisServer } from '../packages/testkit/src/redis-server'
import { startUpstashServer } from '../packages/testkit/src/upstash-server'
import { type Measurement, measure, median, type Op, outcomeOf } from './lib/measure'
import { reportPath, writeResults } from './lib/results'

const env = (name: string, dflt: number) => (process.env[name] ? Number(process.env[name]) : dflt)
const DURATION_MS = env('BENCH_DURATION_MS', 2000)
const ROUNDS = env('BENCH_ROUNDS', 3)
const WARMUP_MS = env('BENCH_WARMUP_MS', 500)
const CONCURRENCY = env('BENCH_CONCURRENCY', 64)
const COLD = env('BENCH_COLD', 5)
const KEYSPACE = 10_000
const LIMIT = 1_000_000
const here = path.dirname(fileURLToPath(import.meta.url))
const log = (s: string) => process.stderr.write(`${s}\n`)
const t0 = Date.now()
const load0 = os.loadavg()

const redis = await startRedisServer()
const rest = await startUpstashServer({ redisPort: redis.port })

try {
  // ---- 1. bundles ---------------------------------------------------------------------------------
  const workers = {
    tollgate: path.join(here, 'edge/tollgate-worker.ts'),
    upstash: path.join(here, 'edge/upstash-worker.ts'),
    baseline: path.join(here, 'edge/baseline-worker.ts'),
  }
  const bundles: Record<keyof typeof workers, WorkerBundle> = {
    tollgate: await bundleWorker(workers.tollgate),
    upstash: await bundleWorker(workers.upstash),
    baseline: await bundleWorker(workers.baseline),
  }
  for (const [name, b] of Object.entries(bundles)) {
    const nodeInputs = b.inputs.filter((i) => i.startsWith('node:'))
    if (nodeInputs.length > 0)
      throw new Error(`${name} bundle pulls Node built-ins: ${nodeInputs.join(', ')}`)
    log(`bundle ${name}: ${b.bytes} B, ${b.gzipBytes} B gzip`)
  }

  // ---- 2. cold starts -----------------------------------------------------------------------------
  const cold: Record<'tollgate' | 'upstash', { startMs: number[]; firstMs: number[] }> = {
    tollgate: { startMs: [], firstMs: [] },
    upstash: { startMs: [], firstMs: [] },
  }
  const coldOnce = async (name: 'tollgate' | 'upstash', i: number) => {
    const spawned = performance.now()
    const w = await startWorkerd({
      code: bundles[name].code,
      bindings: {
        UPSTASH_REDIS_REST_URL: rest.url,
        UPSTASH_REDIS_REST_TOKEN: rest.token,
        PREFIX: `cold-${name}-${i}`,
      },
      ready: 'tcp',
    })
    const listening = performance.now()
    try {
      const res = await fetch(`${w.url}/limited`, { headers: { 'CF-Connecting-IP': '192.0.2.1' } })
      await res.arrayBuffer()
      if (res.status !== 200) throw new Error(`${name}: first request answered ${res.status}\n${w.output()}`)
      cold[name].firstMs.push(performance.now() - listening)
      cold[name].startMs.push(listening - spawned)
    } finally {
      await w.stop()
    }
  }
  // One unmeasured pass each: scripts cached in Redis (a live Redis has them), files in the page cache.
  await coldOnce('tollgate', -1)
  await coldOnce('upstash', -1)
  cold.tollgate = { startMs: [], firstMs: [] }
  cold.upstash = { startMs: [], firstMs: [] }
  for (let i = 0; i < COLD; i++) {
    await coldOnce('tollgate', i)
    await coldOnce('upstash', i)
  }
  log(`cold starts done (${COLD} each)`)

  // ---- 3. decisions/s and REST requests per decision ------------------------------------------------
  const client = () => new Redis({ url: rest.url, token: rest.token })
  const ours = new RateLimiter({
    store: new RedisStore(client()),
    prefix: 'bench-ours',
    limit: LIMIT,
    window: '1m',
    // The peer's deadline (@upstash/ratelimit's `timeout`, 5000 ms by default), like for like: the test
    // REST server's slow tail reaches Tollgate's default 500 ms on a small machine, which would send
    // calls to the failure policy and open the breaker, measuring the fallback instead of the store.
    timeoutMs: 5000,
  })
  const theirs = new Ratelimit({
    redis: client(),
    limiter: Ratelimit.slidingWindow(LIMIT, '60 s'),
    prefix: 'bench-theirs',
  })
  const variants: { name: string; op: Op }[] = [
    {
      name: 'Tollgate (`@tollgate/core`)',
      op: async (i) => outcomeOf(await ours.consume(`k${i % KEYSPACE}`)),
    },
    {
      name: '`@upstash/ratelimit`',
      op: async (i) => {
        const r = await theirs.limit(`k${i % KEYSPACE}`)
        if (r.reason === 'timeout') return 'fallback'
        return r.success ? 'admitted' : 'refused'
      },
    },
  ]
  const results = new Map<string, { m: Measurement; requests: number; commands: number }[]>()
  for (const v of variants) await measure(v.op, { concurrency: CONCURRENCY, durationMs: WARMUP_MS })
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of variants) {
      rest.resetCounters()
      const m = await measure(v.op, { concurrency: CONCURRENCY, durationMs: DURATION_MS })
      const list = results.get(v.name) ?? []
      list.push({ m, requests: rest.requests, commands: rest.commands })
      results.set(v.name, list)
      log(
        `${v.name} round ${round + 1}: ${Math.round(m.perSecond)}/s, ${(rest.requests / m.decisions).toFixed(3)} req/decision`,
      )
    }
  }

  // ---- report -------------------------------------------------------------------------------------
  const kb = (n: number) => `${(n / 1024).toFixed(1)} KiB`
  const med = (xs: number[]) => median(xs)
  const rowsBundle = (['tollgate', 'upstash', 'baseline'] as const).map((name) => {
    const b = bundles[name]
    const over =
      name === 'baseline'
        ? '–'
        : `${kb(b.bytes - bundles.baseline.bytes)} / ${kb(b.gzipBytes - bundles.baseline.gzipBytes)}`
    const label = {
      tollgate: 'Tollgate: `@tollgate/core` + `@tollgate/hono`',
      upstash: '`@upstash/ratelimit` + Hono wiring',
      baseline: 'floor: Hono + `@upstash/redis`, no limiter',
    }[name]
    return `| ${label} | ${b.bytes.toLocaleString('en-US')} | ${b.gzipBytes.toLocaleString('en-US')} | ${over} |`
  })
  const coldRow = (name: 'tollgate' | 'upstash', label: string) =>
    `| ${label} | ${med(cold[name].startMs).toFixed(1)} | ${med(cold[name].firstMs).toFixed(1)} |`
  const perf = variants.map((v) => {
    const list = results.get(v.name)!
    const perSecond = med(list.map((r) => r.m.perSecond))
    const reqPer = med(list.map((r) => r.requests / Math.max(1, r.m.decisions)))
    const cmdPer = med(list.map((r) => r.commands / Math.max(1, r.m.decisions)))
    const p50 = med(list.map((r) => r.m.p50Ms))
    const bad = list.reduce((n, r) => n + r.m.errors + r.m.fallbacks, 0)
    return { name: v.name, perSecond, reqPer, cmdPer, p50, bad }
  })
  // one row per variant, Tollgate's then @upstash/ratelimit's
  const a = perf[0]!
  const b = perf[1]!
  const ratio = (x: number, y: number) => (y === 0 ? '∞' : (x / y).toFixed(2))
  const cpus = os.cpus()
  const report = `## Edge benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC

Machine: ${cpus.length} × ${cpus[0]?.model.trim() ?? '?'} (shared by Node, workerd, the REST server and redis-server),
load average ${load0.map((x) => x.toFixed(2)).join(' ')} at start, ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')} at end. Node ${process.version}, workerd 1.20261117.1, esbuild 0.28.2 (minified ESM,
platform browser, conditions workerd/worker), @upstash/redis 1.39.0, @upstash/ratelimit 2.2.0, hono 4.13.19.
Run took ${((Date.now() - t0) / 1000).toFixed(0)} s.

### Workers bundle (bytes)

| worker | raw | gzip | over the floor (raw / gzip) |
| --- | ---: | ---: | ---: |
${rowsBundle.join('\n')}

### Cold start in workerd (ms, median of ${COLD})

| worker | spawn → listening | first request through the limiter |
| --- | ---: | ---: |
${coldRow('tollgate', 'Tollgate')}
${coldRow('upstash', '`@upstash/ratelimit`')}

### Decisions over REST (Node, ${CONCURRENCY} in flight, ${KEYSPACE.toLocaleString('en-US')} keys, sliding window, all admitted)

| library | decisions/s | REST requests / decision | Redis commands / decision | p50 ms | errors + fallbacks |
| --- | ---: | ---: | ---: | ---: | ---: |
${perf.map((p) => `| ${p.name} | ${Math.round(p.perSecond).toLocaleString('en-US')} | ${p.reqPer.toFixed(3)} | ${p.cmdPer.toFixed(3)} | ${p.p50.toFixed(1)} | ${p.bad} |`).join('\n')}

Ratios, Tollgate / @upstash/ratelimit: bundle gzip ${ratio(bundles.tollgate.gzipBytes, bundles.upstash.gzipBytes)}×, over the floor
${ratio(bundles.tollgate.gzipBytes - bundles.baseline.gzipBytes, bundles.upstash.gzipBytes - bundles.baseline.gzipBytes)}×; first request ${ratio(med(cold.tollgate.firstMs), med(cold.upstash.firstMs))}×; decisions/s ${ratio(a.perSecond, b.perSecond)}×;
REST requests per decision ${ratio(a.reqPer, b.reqPer)}×.

Both clients batch the calls of one turn into one \`/pipeline\` request (Tollgate's REST transport; the
Upstash client's auto-pipelining), so under concurrency a REST request carries several decisions.
`
  process.stdout.write(`${report}\n`)
  const out = reportPath('edge')
  if (out !== '-') {
    writeResults(out, report, 'edge')
    log(`written to ${out}`)
  }
} finally {
  await rest.stop()
  await redis.stop()
}
process.exit(0)
