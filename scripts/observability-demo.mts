/**
 * A demo run for docs/observability.md: real limiters on a throwaway redis-server, with traffic that
 * allows, refuses, hits the deny cache, trips a shadow policy, and loses its Redis for a while (killed,
 * then restarted); `@tollgate/prometheus` collects. Every second the prom-client registry is sampled;
 * at the end each panel query of packages/prometheus/grafana/tollgate-dashboard.json is evaluated over
 * those samples (a small evaluator for the three query shapes the dashboard uses: sum by + rate,
 * histogram_quantile, max by) and drawn as SVG into an HTML page, which headless Chromium screenshots.
 * This is NOT Grafana (none is installable here): it draws the dashboard's own queries over real values.
 *
 * Run: `node --import tsx scripts/observability-demo.mts` (DEMO_SECONDS, default 60; needs `chromium`).
 * Writes docs/images/observability-dashboard.png and benchmarks/results/observability-demo.html.
 */
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import { Registry } from 'prom-client'
import { createClient } from 'redis'
import { startRedisServer } from '../packages/testkit/src/redis-server.ts'

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
const SECONDS = Number(process.env.DEMO_SECONDS ?? 60)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const main = await startRedisServer()
const flaky = await startRedisServer()
const connect = async (url: string) => {
  const c = createClient({ url, socket: { reconnectStrategy: () => 200 } })
  c.on('error', () => {})
  await c.connect()
  return c
}
const mainClient = await connect(main.url)
const flakyClient = await connect(flaky.url)
const registry = new Registry()
const metrics = collectTollgateMetrics({ registry })
const store = new RedisStore(mainClient)
const api = new RateLimiter({ store, name: 'api', prefix: 'demo-api', limit: 40, window: '2s' })
const login = new RateLimiter({
  store,
  name: 'login',
  prefix: 'demo-login',
  policies: { ip: { limit: 30, window: '5s' }, account: { limit: 5, window: '5s', shadow: true } },
})
const search = new RateLimiter({
  store: new RedisStore(flakyClient),
  name: 'search',
  prefix: 'demo-search',
  limit: 100,
  window: '1s',
  timeoutMs: 100,
  onStoreError: 'deny',
  breaker: { failures: 3, cooldownMs: 2000 },
})
const jobs = new RateLimiter({
  store,
  name: 'jobs',
  prefix: 'demo-jobs',
  limit: 5,
  window: '1s',
  algorithm: 'gcra',
})

type Sample = { t: number; metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>> }
const samples: Sample[] = []
const started = Date.now()
let running = true
const loops = [
  (async () => {
    for (let i = 0; running; i++) {
      // Ramps up to twice the quota of 'api' half-way through.
      const perTick = 1 + Math.floor((Date.now() - started) / 1000 / (SECONDS / 4))
      for (let j = 0; j < perTick; j++) await api.consume(`client:${(i + j) % 3}`)
      await sleep(25)
    }
  })(),
  (async () => {
    for (let i = 0; running; i++) {
      await login.consume({ ip: `ip:10.0.0.${i % 2}`, account: `email:user${i % 3}@example.com` })
      await sleep(60)
    }
  })(),
  (async () => {
    while (running) {
      await search.consume('client:1')
      await sleep(20)
    }
  })(),
  ...[1, 2, 3].map((w) =>
    (async () => {
      while (running) await jobs.wait(`queue`, { jitter: 0.5, maxWaitMs: 10_000 }).catch(() => {})
      void w
    })(),
  ),
  (async () => {
    await sleep((SECONDS * 1000) / 3)
    await flaky.kill() // Redis for 'search' goes away...
    await sleep((SECONDS * 1000) / 4)
    await flaky.start() // ...and comes back
  })(),
]
while (Date.now() - started < SECONDS * 1000) {
  await sleep(1000)
  // A deep copy: prom-client hands out its live value objects, which later increments would change.
  const snapshot = JSON.parse(JSON.stringify(await registry.getMetricsAsJSON()))
  samples.push({ t: (Date.now() - started) / 1000, metrics: snapshot })
}
running = false
await Promise.allSettled(loops)

// ---- evaluate the dashboard's queries over the samples -----------------------------------------------
type Series = { name: string; points: Array<[number, number]> }
type Value = { labels: Record<string, string | number>; value: number; metricName?: string }
const WINDOW = 5

function values(sample: Sample, metric: string, matchers: Array<[string, string]>): Value[] {
  const base = metric.replace(/_bucket$/, '')
  const m = sample.metrics.find((x) => x.name === base)
  if (!m) return []
  return (m.values as Value[]).filter(
    (v) => (v.metricName ?? m.name) === metric && matchers.every(([k, want]) => String(v.labels[k]) === want),
  )
}
function matchersOf(sel: string): Array<[string, string]> {
  return [...sel.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!])
}
const keyOf = (labels: Record<string, unknown>, by: string[]) => by.map((b) => `${labels[b] ?? ''}`).join(' ')

function rateBy(metric: string, sel: string, by: string[], i: number): Map<string, Map<string, number>> {
  const now = samples[i]!
  const then = samples[Math.max(0, i - WINDOW)]!
  const dt = now.t - then.t
  const out = new Map<string, Map<string, number>>()
  const before = new Map(
    values(then, metric, matchersOf(sel)).map((v) => [JSON.stringify(v.labels), v.value]),
  )
  for (const v of values(now, metric, matchersOf(sel))) {
    const r = dt > 0 ? Math.max(0, v.value - (before.get(JSON.stringify(v.labels)) ?? 0)) / dt : 0
    const group = keyOf(
      v.labels,
      by.filter((b) => b !== 'le'),
    )
    const le = String(v.labels.le ?? '')
    if (!out.has(group)) out.set(group, new Map())
    const g = out.get(group)!
    g.set(le, (g.get(le) ?? 0) + r)
  }
  return out
}
function quantile(q: number, buckets: Map<string, number>): number {
  const sorted = [...buckets]
    .map(([le, c]) => [le === '+Inf' ? Infinity : Number(le), c] as const)
    .sort((a, b) => a[0] - b[0])
  const total = sorted.at(-1)?.[1] ?? 0
  if (total === 0) return Number.NaN
  const rank = q * total
  let prevLe = 0
  let prevCount = 0
  for (const [le, count] of sorted) {
    if (count >= rank) {
      if (le === Infinity) return prevLe
      return prevLe + (le - prevLe) * ((rank - prevCount) / Math.max(count - prevCount, 1e-12))
    }
    prevLe = le
    prevCount = count
  }
  return prevLe
}
function evaluate(expr: string): Series[] {
  const e = expr.replace(/\{limiter=~"\$limiter",?\s*/g, '{').replace(/\{\}/g, '')
  const series = new Map<string, Array<[number, number]>>()
  const push = (name: string, t: number, v: number) => {
    if (!series.has(name)) series.set(name, [])
    series.get(name)!.push([t, v])
  }
  let m = /^histogram_quantile\(([\d.]+), sum by \(([^)]*)\) \(rate\((\w+)(\{[^}]*\})?\[[^\]]*\]\)\)\)$/.exec(
    e,
  )
  if (m) {
    const by = m[2]!.split(',').map((s) => s.trim())
    for (let i = 1; i < samples.length; i++) {
      for (const [group, buckets] of rateBy(m[3]!, m[4] ?? '', by, i)) {
        const v = quantile(Number(m[1]), buckets)
        if (!Number.isNaN(v)) push(group, samples[i]!.t, v)
      }
    }
    return [...series].map(([name, points]) => ({ name, points }))
  }
  m = /^sum by \(([^)]*)\) \(rate\((\w+)(\{[^}]*\})?\[[^\]]*\]\)\)$/.exec(e)
  if (m) {
    const by = m[1]!.split(',').map((s) => s.trim())
    for (let i = 1; i < samples.length; i++) {
      for (const [group, g] of rateBy(m[2]!, m[3] ?? '', by, i))
        push(
          group,
          samples[i]!.t,
          [...g.values()].reduce((a, b) => a + b, 0),
        )
    }
    return [...series].map(([name, points]) => ({ name, points }))
  }
  m = /^max by \(([^)]*)\) \((\w+)(\{[^}]*\})?\)$/.exec(e)
  if (m) {
    const by = m[1]!.split(',').map((s) => s.trim())
    for (const s of samples) {
      const groups = new Map<string, number>()
      for (const v of values(s, m[2]!, matchersOf(m[3] ?? ''))) {
        const k = keyOf(v.labels, by)
        groups.set(k, Math.max(groups.get(k) ?? -Infinity, v.value))
      }
      for (const [k, v] of groups) push(k, s.t, v)
    }
    return [...series].map(([name, points]) => ({ name, points }))
  }
  throw new Error(`the demo evaluator does not know this query shape: ${expr}`)
}

const COLORS = [
  '#7eb26d',
  '#e24d42',
  '#eab839',
  '#6ed0e0',
  '#ef843c',
  '#1f78c1',
  '#ba43a9',
  '#705da0',
  '#508642',
  '#cca300',
]
function svg(title: string, unit: string, series: Series[]): string {
  const W = 640
  const H = 230
  const L = 60
  const B = 24
  const all = series.flatMap((s) => s.points.map((p) => p[1]))
  const max = Math.max(1e-9, ...all) * 1.1
  const tMax = samples.at(-1)?.t ?? 1
  const x = (t: number) => L + ((W - L - 10) * t) / tMax
  const y = (v: number) => H - B - ((H - B - 10) * v) / max
  const fmt = (v: number) =>
    unit === 's'
      ? v >= 0.1
        ? `${v.toFixed(2)} s`
        : `${(v * 1000).toFixed(1)} ms`
      : unit === 'reqps'
        ? `${v.toFixed(v < 10 ? 1 : 0)}/s`
        : v.toFixed(1)
  const grid = [0, 0.25, 0.5, 0.75, 1]
    .map(
      (f) =>
        `<line x1="${L}" x2="${W - 10}" y1="${y(max * f)}" y2="${y(max * f)}" stroke="#2c3235"/><text x="${L - 6}" y="${y(max * f) + 4}" fill="#8e8e8e" font-size="11" text-anchor="end">${fmt(max * f)}</text>`,
    )
    .join('')
  const lines = series
    .map(
      (s, i) =>
        `<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2" points="${s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ')}"/>`,
    )
    .join('')
  const legend = series
    .map(
      (s, i) =>
        `<span style="margin-right:14px"><span style="display:inline-block;width:12px;height:3px;background:${COLORS[i % COLORS.length]};vertical-align:middle"></span> ${s.name}</span>`,
    )
    .join('')
  return `<div class="panel"><div class="title">${title}</div><svg width="${W}" height="${H}">${grid}${lines}<text x="${W - 10}" y="${H - 6}" fill="#8e8e8e" font-size="11" text-anchor="end">${Math.round(tMax)} s</text><text x="${L}" y="${H - 6}" fill="#8e8e8e" font-size="11">0 s</text></svg><div class="legend">${legend || '<i>no data</i>'}</div></div>`
}

const dashboard = JSON.parse(
  fs.readFileSync(path.join(root, 'packages/prometheus/grafana/tollgate-dashboard.json'), 'utf8'),
)
const panels = dashboard.panels.map((p: any) =>
  svg(p.title, p.fieldConfig.defaults.unit, evaluate(p.targets[0].expr)),
)
const html = `<!doctype html><meta charset="utf-8"><style>
body{background:#111217;color:#d8d9da;font-family:Inter,Helvetica,Arial,sans-serif;margin:16px}
.grid{display:grid;grid-template-columns:repeat(2,660px);gap:10px}.panel{background:#181b1f;border:1px solid #2c3235;padding:8px}
.title{font-size:14px;font-weight:500;margin-bottom:4px}.legend{font-size:11px;color:#ccccdc}.note{font-size:12px;color:#8e8e8e;margin-bottom:10px}
</style><h2 style="margin:0 0 4px">${dashboard.title}</h2>
<div class="note">Not Grafana: the panel queries of packages/prometheus/grafana/tollgate-dashboard.json evaluated by scripts/observability-demo.mts over real prom-client samples (1/s, rate windows of ${WINDOW} s) of a ${SECONDS} s demo run: limiters api, login (shadow policy 'account'), search (its redis-server killed at ${Math.round(SECONDS / 3)} s, restarted ${Math.round(SECONDS / 4)} s later, failure policy deny), jobs (3 workers in wait() with jitter).</div>
<div class="grid">${panels.join('')}</div>`
const htmlPath = path.join(root, 'benchmarks/results/observability-demo.html')
fs.writeFileSync(htmlPath, html)
const png = path.join(root, 'docs/images/observability-dashboard.png')
execFileSync(
  'chromium',
  [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--hide-scrollbars',
    `--screenshot=${png}`,
    '--window-size=1370,1640',
    `file://${htmlPath}`,
  ],
  { stdio: 'ignore' },
)
process.stderr.write(`wrote ${png}\n`)
metrics.stop()
mainClient.destroy()
flakyClient.destroy()
await main.stop()
await flaky.stop()
process.exit(0)
