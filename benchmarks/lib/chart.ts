/**
 * Plain SVG bar charts of the benchmarks' results (no dependency): one chart per benchmark, chosen by
 * `chartOf`, and one summary of Tollgate against the peers (`summaryChart`) for the README.
 * @module
 */
import type { Results, Table } from './report-json'

export interface Bar {
  label: string
  value: number
  /** Tollgate's bars are coloured; the peers' and the baselines' are grey. */
  tollgate: boolean
}

export interface Panel {
  title: string
  bars: Bar[]
  /** How a value is written at the end of its bar. */
  format: (v: number) => string
  /** A dashed line at this value (1 for ratios: the peer). */
  reference?: { value: number; label: string }
}

export interface Chart {
  title: string
  /** One line under the title: the command and the machine. */
  subtitle: string
  panels: Panel[]
}

const WIDTH = 860
const LABEL_W = 350
const BAR_W = 380
const BAR_H = 18
const GAP = 6
const TOLLGATE = '#0f766e'
const PEER = '#9ca3af'
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"'

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

export const thousands = (v: number) => Math.round(v).toLocaleString('en-US')
export const times = (v: number) => `${v.toFixed(2)}×`
const fixed = (digits: number, unit: string) => (v: number) => `${v.toFixed(digits)}${unit}`

/** An SVG of horizontal bars, one block per panel, each panel on its own scale. */
export function renderSvg(chart: Chart): string {
  const out: string[] = []
  let y = 30
  out.push(`<text x="16" y="${y}" font-size="17" font-weight="600" fill="#111827">${esc(chart.title)}</text>`)
  y += 20
  out.push(`<text x="16" y="${y}" font-size="12" fill="#4b5563">${esc(chart.subtitle)}</text>`)
  y += 16
  for (const panel of chart.panels) {
    y += 24
    out.push(
      `<text x="16" y="${y}" font-size="13" font-weight="600" fill="#1f2937">${esc(panel.title)}</text>`,
    )
    y += 10
    const max = Math.max(...panel.bars.map((b) => b.value), panel.reference?.value ?? 0) || 1
    const top = y
    for (const bar of panel.bars) {
      const w = Math.max(1, (bar.value / max) * BAR_W)
      const color = bar.tollgate ? TOLLGATE : PEER
      out.push(
        `<text x="${LABEL_W - 8}" y="${y + BAR_H - 5}" font-size="12" text-anchor="end" fill="#374151"${bar.tollgate ? ' font-weight="600"' : ''}>${esc(bar.label)}</text>`,
        `<rect x="${LABEL_W}" y="${y}" width="${w.toFixed(1)}" height="${BAR_H}" rx="2" fill="${color}"/>`,
        `<text x="${(LABEL_W + w + 6).toFixed(1)}" y="${y + BAR_H - 5}" font-size="12" fill="#111827">${esc(panel.format(bar.value))}</text>`,
      )
      y += BAR_H + GAP
    }
    if (panel.reference) {
      const x = (LABEL_W + (panel.reference.value / max) * BAR_W).toFixed(1)
      out.push(
        `<line x1="${x}" y1="${top - 4}" x2="${x}" y2="${y - GAP + 4}" stroke="#6b7280" stroke-dasharray="4 3"/>`,
        `<text x="${x}" y="${y + 10}" font-size="11" text-anchor="middle" fill="#6b7280">${esc(panel.reference.label)}</text>`,
      )
      y += 12
    }
  }
  y += 16
  const legend = y
  out.push(
    `<rect x="16" y="${legend - 10}" width="12" height="12" fill="${TOLLGATE}"/>`,
    `<text x="34" y="${legend}" font-size="12" fill="#374151">Tollgate</text>`,
  )
  if (chart.panels.some((p) => p.bars.some((b) => !b.tollgate)))
    out.push(
      `<rect x="100" y="${legend - 10}" width="12" height="12" fill="${PEER}"/>`,
      `<text x="118" y="${legend}" font-size="12" fill="#374151">peer or baseline</text>`,
    )
  else if (chart.panels.some((p) => p.reference))
    out.push(
      `<line x1="100" y1="${legend - 4}" x2="124" y2="${legend - 4}" stroke="#6b7280" stroke-dasharray="4 3"/>`,
      `<text x="130" y="${legend}" font-size="12" fill="#374151">the peer in the same run (1×)</text>`,
    )
  const height = legend + 14
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ${FONT}>`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    ...out,
    '</svg>',
    '',
  ].join('\n')
}

/** The first table whose columns include every one of `columns`. */
function table(results: Results, ...columns: string[]): Table {
  const t = results.tables.find((x) => columns.every((c) => x.columns.some((col) => col.startsWith(c))))
  if (!t) throw new Error(`${results.report}: no table with columns ${columns.join(', ')}`)
  return t
}

/** The number in column `column` of the row whose first cells are `match` (in order). */
function value(t: Table, column: string, ...match: string[]): number {
  const c = t.columns.findIndex((col) => col.startsWith(column))
  const row = t.rows.find((r) => match.every((m, i) => String(r[i]) === m))
  const v = row?.[c]
  if (typeof v !== 'number') throw new Error(`no number in "${column}" for ${match.join(' / ')}`)
  return v
}

const isTollgate = (label: string) => /^Tollgate\b/.test(label)

/** The line under a chart's title: the command and the machine (as the report's header gives it). */
function subtitle(results: Results, command: string): string {
  const header = results.header.join(' ').replace(/\((R|TM)\)/g, '')
  const cpu = /(\d+)\s*(?:[×x]|cores \(|shared cores, )\s*([A-Z][A-Za-z0-9 ]*[A-Za-z0-9])/.exec(header)
  const node = /Node v?(\d+)/.exec(header)
  const redis = /(?:redis-server|Redis) (\d+\.\d+)/.exec(header)
  const machine = [
    cpu ? `${cpu[1]} vCPUs (${cpu[2]})` : undefined,
    node ? `Node ${node[1]}` : undefined,
    redis ? `Redis ${redis[1]}` : undefined,
  ].filter(Boolean)
  return [command, machine.join(', ')].filter(Boolean).join(' · ')
}

type ChartOf = (r: Results) => Chart

const core: ChartOf = (r) => {
  const t = table(r, 'Variant', 'Keys', 'decisions/s')
  const pairs: [string, string, string][] = [
    [
      'node-redis, both without per-command timeout',
      'node-redis, no cmd timeout',
      'node-redis, no cmd timeout',
    ],
    ['node-redis as users get it', 'node-redis', 'node-redis'],
    ['ioredis', 'ioredis', 'ioredis'],
  ]
  const panel = (keys: string): Panel => ({
    title: `consume(), ${keys}: decisions per second, 256 in flight`,
    format: thousands,
    bars: pairs.flatMap(([label, tg, peer]) => [
      {
        label: `Tollgate, ${label}`,
        value: value(t, 'decisions/s', `Tollgate sliding-window (${tg})`, keys),
        tollgate: true,
      },
      {
        label: `rate-limiter-flexible, ${label}`,
        value: value(t, 'decisions/s', `rate-limiter-flexible (${peer})`, keys),
        tollgate: false,
      },
    ]),
  })
  return {
    title: 'Core: Tollgate (sliding window) against rate-limiter-flexible, same run',
    // "like for like": neither side arms node-redis' per-command timeout; "as users get it": the peer does
    subtitle: subtitle(r, 'pnpm bench:core'),
    panels: [panel('1 hot key'), panel('10k keys')],
  }
}

const http: ChartOf = (r) => {
  const t = table(r, 'Framework', 'Limiter', 'req/s')
  const panels = ['express', 'fastify', 'hono'].map((fw): Panel => {
    const rows = t.rows.filter((row) => row[0] === fw && !String(row[1]).includes('refused'))
    return {
      title: `${fw}: requests per second (autocannon, 50 connections)`,
      format: thousands,
      bars: rows.map((row) => ({
        label: String(row[1])
          .replace(/ \((node-redis|ioredis)[^)]*\)/, '')
          .replace(/ RedisStore/, '')
          .replace(/ \+ rate-limit-redis [\d.]+/, '')
          .replace(/ \((key function|keyGenerator)\)/, '')
          .replace(/, 10,000 identities/, ', 10k identities')
          .replace(/ (\d+\.\d+)(,|$)/, ' $1$2'),
        value: value(t, 'req/s', fw, String(row[1])),
        tollgate: isTollgate(String(row[1])),
      })),
    }
  })
  return {
    title: 'HTTP: bare app, Tollgate and the peer limiter, same run',
    subtitle: subtitle(r, 'pnpm bench:http'),
    panels,
  }
}

const memory: ChartOf = (r) => {
  const t = table(r, 'store', 'bytes per identity')
  return {
    title: 'Redis memory per identity (used_memory, one request per identity), same run',
    subtitle: subtitle(r, 'pnpm bench:memory'),
    panels: [
      {
        title: 'bytes per identity, lower is better',
        format: fixed(1, ' B'),
        bars: t.rows.map((row) => ({
          label: String(row[0]),
          value: value(t, 'bytes per identity', String(row[0])),
          tollgate: isTollgate(String(row[0])),
        })),
      },
    ],
  }
}

/**
 * docs/images/memory-scale.svg: the memory run's scale table, bytes per identity by variant, a panel per
 * number of identities.
 */
export function memoryScaleChart(r: Results): Chart {
  const t = table(r, 'variant', 'identities', 'bytes per identity')
  const scales = [...new Set(t.rows.map((row) => Number(row[1])))]
  const bytes = t.columns.findIndex((c) => c.startsWith('bytes per identity'))
  return {
    title: 'Redis memory per identity at scale (used_memory, one request per identity), same run',
    subtitle: subtitle(r, 'pnpm bench:memory'),
    panels: scales.map((n) => ({
      title: `${n.toLocaleString('en-US')} identities: bytes per identity, lower is better`,
      format: fixed(1, ' B'),
      bars: t.rows
        .filter((row) => Number(row[1]) === n)
        .map((row) => ({
          label: String(row[0]),
          value: Number(row[bytes]),
          tollgate: isTollgate(String(row[0])),
        })),
    })),
  }
}

const cluster: ChartOf = (r) => {
  const t = table(r, 'Limiter', 'Redis', 'decisions/s')
  const limiters = [...new Set(t.rows.map((row) => String(row[0])))]
  return {
    title: 'Redis Cluster: one node against a 3-primary cluster, same run',
    subtitle: subtitle(r, 'pnpm bench:cluster'),
    panels: limiters.map((l) => ({
      title: `${l}: decisions per second`,
      format: thousands,
      bars: t.rows
        .filter((row) => row[0] === l)
        .map((row) => ({
          label: `Tollgate, ${row[1]}`,
          value: value(t, 'decisions/s', l, String(row[1])),
          tollgate: true,
        })),
    })),
  }
}

const edge: ChartOf = (r) => {
  const bundle = table(r, 'worker', 'raw', 'gzip')
  const cold = table(r, 'worker', 'first request')
  const rest = table(r, 'library', 'decisions/s')
  const label = (s: string) => s.replace(/`/g, '')
  return {
    title: 'Edge: Hono on Cloudflare Workers, Tollgate against @upstash/ratelimit, same run',
    subtitle: subtitle(r, 'pnpm bench:edge'),
    panels: [
      {
        title: 'Workers bundle, gzipped KB, lower is better',
        format: fixed(1, ' KB'),
        bars: bundle.rows.map((row) => ({
          label: label(String(row[0])),
          value: value(bundle, 'gzip', String(row[0])) / 1000,
          tollgate: isTollgate(String(row[0])),
        })),
      },
      {
        title: 'first request in a cold workerd, ms (median of 5), lower is better',
        format: fixed(1, ' ms'),
        bars: cold.rows.map((row) => ({
          label: label(String(row[0])),
          value: value(cold, 'first request', String(row[0])),
          tollgate: isTollgate(String(row[0])),
        })),
      },
      {
        title: 'decisions per second over Redis REST (64 in flight)',
        format: thousands,
        bars: rest.rows.map((row) => ({
          label: label(String(row[0])),
          value: value(rest, 'decisions/s', String(row[0])),
          tollgate: isTollgate(String(row[0])),
        })),
      },
    ],
  }
}

const scriptCost: ChartOf = (r) => {
  const t = table(r, 'Script', 'Redis CPU')
  return {
    title: 'What a decision costs Redis: CPU per decision, script by script',
    subtitle: subtitle(r, 'pnpm bench:script-cost'),
    panels: [
      {
        title: 'Redis CPU µs per decision (floors: per call), lower is better',
        format: fixed(2, ' µs'),
        bars: t.rows.map((row) => ({
          label: String(row[0])
            .replace(/`/g, '')
            .replace(/Tollgate lone call \(consume_sliding_window\)/i, 'Tollgate lone call')
            .replace('Tollgate batch script', 'Tollgate batch')
            .replace(/ \(one run, as sent\)/, ', as one run')
            .replace(/ \(per-call form[^)]*\)/, ', call by call')
            .replace(/, 7 integers back/, ''),
          value: value(t, 'Redis CPU', String(row[0])),
          tollgate: isTollgate(String(row[0])),
        })),
      },
    ],
  }
}

const observability: ChartOf = (r) => {
  const t = table(r, 'store', 'collector')
  const stores = [...new Set(t.rows.map((row) => String(row[0])))]
  return {
    title: 'Observability: consume() with and without a metrics collector, same run',
    subtitle: subtitle(r, 'pnpm bench:observability'),
    panels: stores.map((s) => ({
      title: `${s}: decisions per second`,
      format: thousands,
      bars: t.rows
        .filter((row) => row[0] === s)
        .map((row) => ({
          label: String(row[1]),
          value: value(t, 'decisions/s', s, String(row[1])),
          tollgate: true,
        })),
    })),
  }
}

/** Compact against a key each: Redis CPU per decision of a second call, a panel per number of identities. */
const compactCost: ChartOf = (r) => {
  const t = table(r, 'variant', 'identities', 'second call')
  const scales = [...new Set(t.rows.map((row) => Number(String(row[1]).replace(/,/g, ''))))]
  const second = t.columns.findIndex((c) => c.startsWith('second call'))
  return {
    title: 'What compact storage costs Redis against a key each: CPU per decision, same run',
    subtitle: subtitle(r, 'node --import tsx benchmarks/compact-cost.mts'),
    panels: scales.map((n) => ({
      title: `${n.toLocaleString('en-US')} identities: Redis µs per decision, second call, lower is better`,
      format: fixed(2, ' µs'),
      bars: t.rows
        .filter((row) => Number(String(row[1]).replace(/,/g, '')) === n)
        .map((row) => ({
          label: String(row[0]),
          value: Number(row[second]),
          tollgate: !String(row[0]).startsWith('rate-limiter-flexible'),
        })),
    })),
  }
}

const CHARTS: Record<string, ChartOf> = {
  'compact-cost': compactCost,
  core,
  http,
  memory,
  cluster,
  edge,
  'script-cost': scriptCost,
  observability,
}

export function chartOf(results: Results): Chart {
  const of = CHARTS[results.bench]
  if (!of) throw new Error(`no chart for benchmark ${results.bench}`)
  return of(results)
}

/** The README's picture: Tollgate over the peer in the same run, for the core and the HTTP benchmarks. */
export function summaryChart(coreResults: Results, httpResults: Results): Chart {
  const c = table(coreResults, 'Variant', 'Keys', 'vs rate-limiter-flexible')
  const h = table(httpResults, 'Framework', 'Tollgate / peer')
  const ratio = (keys: string, client: string) =>
    value(c, 'vs rate-limiter-flexible', `Tollgate sliding-window (${client})`, keys)
  const peers: Record<string, string> = {
    express: 'Express vs express-rate-limit',
    fastify: 'Fastify vs @fastify/rate-limit',
    hono: 'Hono vs hono-rate-limiter',
  }
  return {
    title: 'Tollgate against the peer limiters, measured in the same run (1× = the peer)',
    subtitle: subtitle(coreResults, 'pnpm bench (core, then HTTP)'),
    panels: [
      {
        title: 'Core: consume() decisions per second over rate-limiter-flexible',
        format: times,
        reference: { value: 1, label: 'peer' },
        bars: (
          [
            ['1 hot key', 'node-redis, no cmd timeout', 'node-redis, like for like, 1 hot key'],
            ['10k keys', 'node-redis, no cmd timeout', 'node-redis, like for like, 10k keys'],
            ['1 hot key', 'ioredis', 'ioredis, 1 hot key'],
            ['10k keys', 'ioredis', 'ioredis, 10k keys'],
          ] as const
        ).map(([keys, client, label]) => ({ label, value: ratio(keys, client), tollgate: true })),
      },
      {
        title: 'HTTP: requests per second over the framework’s peer limiter',
        format: times,
        reference: { value: 1, label: 'peer' },
        bars: ['express', 'fastify', 'hono'].flatMap((fw) => [
          { label: `${peers[fw]}, one client`, value: value(h, 'Tollgate / peer', fw), tollgate: true },
          {
            label: `${peers[fw]}, 10k identities`,
            value: value(h, 'Tollgate / peer, 10,000 identities', fw),
            tollgate: true,
          },
        ]),
      },
    ],
  }
}
