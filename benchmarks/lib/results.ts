/**
 * A benchmark's results as JSON, next to its markdown report. The JSON is read from the report's own
 * tables, so the two cannot disagree, and an old report converts the same way as a new run
 * (`benchmarks/charts.mts <report>.md`). `benchmarks/results/current.json` names the run each chart in
 * docs/images/ is drawn from.
 * @module
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { chartOf, renderSvg, summaryChart } from './chart'
import { parseReport, type Results } from './report-json'

export { parseReport, type Results, type Table } from './report-json'

const here = path.dirname(fileURLToPath(import.meta.url))
export const RESULTS_DIR = path.join(here, '..', 'results')
export const IMAGES_DIR = path.join(here, '..', '..', 'docs', 'images')
export const CURRENT = path.join(RESULTS_DIR, 'current.json')

/** Where a run's report goes: BENCH_OUT ('-': nowhere), or benchmarks/results/<bench>-<date>.md (-1, -2, … for a day's later runs). */
export function reportPath(bench: string): string {
  if (process.env.BENCH_OUT !== undefined) return process.env.BENCH_OUT
  // a later run of the same day gets a suffix past the day's last: a run's report is history, never replaced
  const name = `${bench}-${new Date().toISOString().slice(0, 10)}`
  let last = -1
  for (const file of fs.readdirSync(RESULTS_DIR)) {
    const m = file.startsWith(name) ? /^(?:-(\d+))?\.md$/.exec(file.slice(name.length)) : null
    if (m) last = Math.max(last, m[1] === undefined ? 0 : Number(m[1]))
  }
  return path.join(RESULTS_DIR, last < 0 ? `${name}.md` : `${name}-${last + 1}.md`)
}

/**
 * Writes a run's report, its JSON beside it and the benchmark's chart. A run written into
 * benchmarks/results/ becomes the current one (current.json, docs/images/<bench>.svg); a report written
 * elsewhere (BENCH_OUT) gets its chart beside it, so a trial run leaves the docs alone.
 * BENCH_CHART overrides the chart's path (`-`: none).
 */
export function writeResults(out: string, report: string, bench: string): void {
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.writeFileSync(out, report)
  const results = parseReport(report, bench, path.basename(out))
  const json = out.replace(/\.md$/, '') + '.json'
  fs.writeFileSync(json, `${JSON.stringify(results, null, 2)}\n`)
  const current = path.resolve(path.dirname(out)) === path.resolve(RESULTS_DIR)
  const chart =
    process.env.BENCH_CHART ??
    (current ? path.join(IMAGES_DIR, `${bench}.svg`) : out.replace(/\.md$/, '.svg'))
  if (current) setCurrent(bench, path.basename(json))
  if (chart !== '-') writeChart(results, chart)
  process.stderr.write(`results as JSON: ${json}${chart === '-' ? '' : `; chart: ${chart}`}\n`)
  if (current && process.env.BENCH_CHART !== '-' && (bench === 'core' || bench === 'http')) writeSummary()
}

/** Redraws docs/images/summary.svg (the README's picture) from the current core and HTTP results. */
export function writeSummary(): void {
  const current = readCurrent()
  if (!current.core || !current.http) return
  const svg = renderSvg(summaryChart(readResults(current.core), readResults(current.http)))
  fs.mkdirSync(IMAGES_DIR, { recursive: true })
  fs.writeFileSync(path.join(IMAGES_DIR, 'summary.svg'), svg)
}

/** Draws a benchmark's chart from its results. */
export function writeChart(results: Results, file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, renderSvg(chartOf(results)))
}

/** The results file each benchmark's chart is drawn from: `{ "core": "core-….json", … }`. */
export function readCurrent(): Record<string, string> {
  return fs.existsSync(CURRENT) ? JSON.parse(fs.readFileSync(CURRENT, 'utf8')) : {}
}

export function setCurrent(bench: string, file: string): void {
  const current = { ...readCurrent(), [bench]: file }
  const sorted = Object.fromEntries(Object.entries(current).sort(([a], [b]) => a.localeCompare(b)))
  fs.writeFileSync(CURRENT, `${JSON.stringify(sorted, null, 2)}\n`)
}

export function readResults(file: string): Results {
  return JSON.parse(fs.readFileSync(path.resolve(RESULTS_DIR, file), 'utf8'))
}
