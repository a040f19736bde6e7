/**
 * The Grafana dashboard (`grafana/tollgate-dashboard.json`) checked without a Grafana server (none installs
 * here):
 *
 * 1. its JSON type-checks, by the TypeScript compiler, against Grafana's own published dashboard types
 *    (`@grafana/schema`, generated from Grafana's dashboard schema): the dashboard as `Dashboard`, and each
 *    time-series panel's `options` and `fieldConfig.defaults.custom` against the time-series panel's
 *    `Options` and `FieldConfig` (partial: Grafana fills the options a panel leaves out). The JSON is
 *    checked as an object literal, so a key the schema does not know is an error too;
 * 2. every PromQL query (panels and the `limiter` variable) names only metrics, labels and label values
 *    that a real prom-client registry exposes after a scripted run of decisions against a real
 *    redis-server (allowed, refused, deny cache, shadow, failure policy with store errors and an open
 *    breaker, wait()).
 *
 * Neither runs the queries in Prometheus nor renders the panels in Grafana.
 */
import fs from 'node:fs'
import path from 'node:path'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { at, redisUrl, take } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { Registry } from 'prom-client'
import { createClient } from 'redis'
import ts from 'typescript'
import { collectTollgateMetrics } from '../src'

const DASHBOARD_FILE = path.join(__dirname, '../grafana/tollgate-dashboard.json')
const dashboardText = fs.readFileSync(DASHBOARD_FILE, 'utf8')

interface Target {
  refId: string
  expr: string
}
interface PanelJson {
  type: string
  title: string
  targets: Target[]
  options?: unknown
  fieldConfig?: { defaults?: { custom?: unknown } }
}
const dashboard = JSON.parse(dashboardText) as {
  panels: PanelJson[]
  templating: { list: Array<{ name: string; query: unknown }> }
}

/**
 * Type-checks `source` as a module beside this test (so `@grafana/schema` resolves from this package)
 * and returns its diagnostics as text, one per line.
 */
function typeErrors(source: string): string[] {
  const file = path.join(__dirname, '__grafana_dashboard_check__.ts')
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.Preserve,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    lib: ['lib.es2022.d.ts'],
  }
  const host = ts.createCompilerHost(options)
  const getSourceFile = host.getSourceFile.bind(host)
  host.getSourceFile = (name, language, ...rest) =>
    name === file ? ts.createSourceFile(name, source, language) : getSourceFile(name, language, ...rest)
  const fileExists = host.fileExists.bind(host)
  host.fileExists = (name) => name === file || fileExists(name)
  const readFile = host.readFile.bind(host)
  host.readFile = (name) => (name === file ? source : readFile(name))
  const program = ts.createProgram([file], options, host)
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where =
      d.file && d.start !== undefined && d.file.fileName === file
        ? `line ${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: `
        : `${d.file?.fileName ?? ''} `
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n')
  })
}

/**
 * Grafana's types model string enums as TypeScript enums, which no JSON string is assignable to; `Json<T>`
 * turns each into the union of its values (`${ThresholdsMode}` is 'absolute' | 'percentage'). Numeric
 * enums stay: a number literal is assignable to one only if it is a member.
 */
const PRELUDE = `
import type { Dashboard, VariableModel } from '@grafana/schema'
import type {
  FieldConfig as TimeSeriesFieldConfig,
  Options as TimeSeriesOptions,
} from '@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen'
type Json<T> = T extends string
  ? \`\${T}\`
  : T extends readonly (infer U)[]
    ? Json<U>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T
type Partial2<T> = T extends readonly unknown[] ? T : T extends object ? { [K in keyof T]?: Partial2<T[K]> } : T
// One addition: Grafana writes \`definition\` (the query's display text) on every query variable it saves
// (QueryVariableModel in @grafana/data); the dashboard schema's VariableModel does not declare it.
type DashboardJson = Omit<Json<Dashboard>, 'templating'> & {
  templating?: { list?: Array<Json<VariableModel> & { definition?: string }> }
}
`

describe('the Grafana dashboard', () => {
  it("type-checks against @grafana/schema's Dashboard and the time-series panel's Options and FieldConfig", () => {
    const timeSeries = dashboard.panels.filter((p) => p.type === 'timeseries')
    expect(timeSeries.length).toBe(dashboard.panels.length) // the only panel type it uses (else check its types)
    const lines = [
      PRELUDE,
      `export const dashboard: DashboardJson = ${dashboardText.trim()}`,
      ...timeSeries.flatMap((p, i) => [
        `export const options${i}: Partial2<Json<TimeSeriesOptions>> = ${JSON.stringify(p.options ?? {})}`,
        `export const custom${i}: Partial2<Json<TimeSeriesFieldConfig>> = ${JSON.stringify(p.fieldConfig?.defaults?.custom ?? {})}`,
      ]),
    ]
    expect(typeErrors(lines.join('\n'))).toEqual([])
  })

  it('the type check catches what Grafana would not accept: a misspelled key, a wrong enum value, a bad type', () => {
    const broken = JSON.parse(dashboardText)
    broken.panels[0].gridpos = broken.panels[0].gridPos // misspelled (Grafana's is gridPos)
    broken.templating.list[1].refresh = 7 // VariableRefresh is 0, 1 or 2
    broken.panels[1].options.legend.displayMode = 'grid' // LegendDisplayMode: list | table | hidden
    broken.schemaVersion = '39'
    broken.templating.list[0].definitoin = 'label_values(x, y)' // only `definition` is added to the schema
    const errors = typeErrors(
      [
        PRELUDE,
        `export const dashboard: DashboardJson = ${JSON.stringify(broken, null, 2)}`,
        `export const options: Partial2<Json<TimeSeriesOptions>> = ${JSON.stringify(broken.panels[1].options)}`,
      ].join('\n'),
    ).join('\n')
    expect(errors).toMatch(/'"gridpos"' does not exist/)
    expect(errors).toMatch(/'7' is not assignable to type 'VariableRefresh/)
    expect(errors).toMatch(/'"grid"' is not assignable/)
    expect(errors).toMatch(/'string' is not assignable to type 'number'/)
    expect(errors).toMatch(/'"definitoin"' does not exist/)
  })

  describe('its PromQL', () => {
    let client: ReturnType<typeof createClient>
    let offline: ReturnType<typeof createClient>
    const registry = new Registry()
    /** Exposed sample name -> label name -> values seen. */
    const series = new Map<string, Map<string, Set<string>>>()

    beforeAll(async () => {
      client = createClient({ url: redisUrl() })
      client.on('error', () => {})
      await client.connect()
      // A real client that never connects: its calls fail, the failure policy answers, the breaker opens.
      offline = createClient({ url: redisUrl() })
      offline.on('error', () => {})
      const metrics = collectTollgateMetrics({ registry })
      try {
        const store = new RedisStore(client)
        const api = new RateLimiter({
          store,
          name: 'dash-api',
          prefix: uniquePrefix('dash'),
          policies: { ip: { limit: 2, window: '1m' }, trial: { limit: 1, window: '1m', shadow: true } },
        })
        for (let i = 0; i < 4; i++) await api.consume({ ip: 'ip:1', trial: 'ip:1' }) // allowed, shadow, refused, cache
        await api.wait({ ip: 'ip:2', trial: 'ip:2' })
        const down = new RateLimiter({
          store: new RedisStore(offline),
          name: 'dash-down',
          prefix: uniquePrefix('dashd'),
          limit: 5,
          window: '1m',
          onStoreError: 'deny',
          breaker: { failures: 2, cooldownMs: 60_000 },
        })
        for (let i = 0; i < 3; i++) await down.consume('u')
        // Sample names as exposed (histograms as _bucket / _sum / _count), with their labels and values.
        for (const metric of await registry.getMetricsAsJSON()) {
          for (const value of metric.values as Array<{
            metricName?: string
            labels: Record<string, unknown>
          }>) {
            const name = value.metricName ?? metric.name
            const labels = series.get(name) ?? new Map<string, Set<string>>()
            series.set(name, labels)
            for (const [label, v] of Object.entries(value.labels)) {
              const seen = labels.get(label) ?? new Set<string>()
              labels.set(label, seen.add(String(v)))
            }
          }
        }
      } finally {
        metrics.stop()
      }
    })
    afterAll(async () => {
      await client.quit()
    })

    const queries: Array<[string, string]> = [
      ...dashboard.panels.flatMap((p) => p.targets.map((t): [string, string] => [p.title, t.expr])),
      ...dashboard.templating.list
        .filter((v) => typeof v.query === 'object')
        .map((v): [string, string] => [`variable ${v.name}`, (v.query as { query: string }).query]),
    ]
    const FUNCTIONS = new Set(['sum', 'max', 'rate', 'histogram_quantile', 'label_values', 'by'])

    it('covers every metric the collector exports, each in at least one panel', () => {
      const used = new Set(queries.flatMap(([, q]) => metricNames(q)))
      const exported = [...series.keys()].map((n) => n.replace(/_(bucket|sum|count)$/, ''))
      expect([...new Set(exported)].sort()).toEqual(
        [
          'tollgate_breaker_state',
          'tollgate_decision_duration_seconds',
          'tollgate_decisions_total',
          'tollgate_deny_cache_hits_total',
          'tollgate_fallback_decisions_total',
          'tollgate_store_duration_seconds',
          'tollgate_store_errors_total',
          'tollgate_wait_duration_seconds',
        ].sort(),
      )
      for (const name of new Set(exported)) {
        expect([name, [...used].some((u) => u.replace(/_bucket$/, '') === name)]).toEqual([name, true])
      }
    })

    it.each(queries)('%s: names only exposed metrics, labels and label values (%s)', (_title, query) => {
      const names = metricNames(query)
      expect(names.length).toBeGreaterThan(0)
      for (const name of names) {
        const labels = series.get(name)
        expect([name, labels !== undefined]).toEqual([name, true])
        // Matchers: label="value" must be a value the run exposed; label=~"$var" a label it has.
        const selector = new RegExp(`${name}\\{([^}]*)\\}`).exec(query)?.[1] ?? ''
        for (const m of selector.matchAll(/(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"/g)) {
          const [, label, op, value] = take(m, 4)
          expect([name, label, labels!.has(label)]).toEqual([name, label, true])
          if (op === '=')
            expect([name, label, value, labels!.get(label)!.has(value)]).toEqual([name, label, value, true])
        }
      }
      // Grouping labels (`by (...)`) and label_values' label exist on the metric the query reads.
      const grouped = [...query.matchAll(/by \(([^)]*)\)/g)].flatMap((m) =>
        at(m, 1)
          .split(',')
          .map((s) => s.trim()),
      )
      const labelValues = /label_values\(\s*\w+\s*,\s*(\w+)\s*\)/.exec(query)?.[1]
      for (const label of [...grouped, ...(labelValues ? [labelValues] : [])]) {
        expect([label, names.some((n) => series.get(n)?.has(label))]).toEqual([label, true])
      }
    })

    /** The metric names of a query: its identifiers less strings, matchers, ranges, groupings, functions. */
    function metricNames(query: string): string[] {
      const bare = query
        .replace(/"[^"]*"/g, '""')
        .replace(/\{[^}]*\}/g, ' ')
        .replace(/\[[^\]]*\]/g, ' ')
        .replace(/\b(by|without)\s*\([^)]*\)/g, ' ')
      const identifiers = bare.match(/[A-Za-z_:][\w:]*/g) ?? []
      const names = identifiers.filter((id) => !FUNCTIONS.has(id))
      // label_values(metric, label): the second argument is a label, not a metric.
      const labelValues = /label_values\(\s*\w+\s*,\s*(\w+)\s*\)/.exec(query)?.[1]
      return [...new Set(names.filter((n) => n !== labelValues))]
    }
  })
})
