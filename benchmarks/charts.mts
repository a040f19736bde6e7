/**
 * Redraws the benchmarks' charts (docs/images/<bench>.svg, memory-scale.svg and the README's summary.svg)
 * from their JSON.
 *
 *   node --import tsx benchmarks/charts.mts                 every chart, from benchmarks/results/current.json
 *   node --import tsx benchmarks/charts.mts <report>.md …   converts recorded reports to JSON beside them
 *                                                            and makes each its benchmark's current run
 *
 * The benchmark scripts call the same code when they finish (lib/results.ts), so this is only needed to
 * convert an older report or to redraw after a change of the chart code.
 */
import fs from 'node:fs'
import path from 'node:path'
import { memoryScaleChart, renderSvg } from './lib/chart'
import {
  IMAGES_DIR,
  parseReport,
  RESULTS_DIR,
  readCurrent,
  readResults,
  setCurrent,
  writeChart,
  writeSummary,
} from './lib/results'

/** `core-2026-12-01-5.md` → `core`; `script-cost-….md` → `script-cost`. */
const benchOf = (file: string) => /^([a-z-]+?)-\d{4}-\d{2}-\d{2}/.exec(path.basename(file))?.[1]

for (const report of process.argv.slice(2)) {
  const bench = benchOf(report)
  if (!bench) throw new Error(`${report}: not a <bench>-<date>….md report`)
  const results = parseReport(fs.readFileSync(report, 'utf8'), bench, path.basename(report))
  const json = path.join(RESULTS_DIR, path.basename(report).replace(/\.md$/, '.json'))
  fs.writeFileSync(json, `${JSON.stringify(results, null, 2)}\n`)
  setCurrent(bench, path.basename(json))
  process.stderr.write(`${path.relative(process.cwd(), json)}\n`)
}

for (const [bench, file] of Object.entries(readCurrent())) {
  const svg = path.join(IMAGES_DIR, `${bench}.svg`)
  writeChart(readResults(file), svg)
  process.stderr.write(`${path.relative(process.cwd(), svg)} from ${file}\n`)
}
const current = readCurrent()
if (current.memory) {
  // the memory run's second chart, one panel per scale, comes from the same JSON
  const svg = path.join(IMAGES_DIR, 'memory-scale.svg')
  fs.writeFileSync(svg, renderSvg(memoryScaleChart(readResults(current.memory))))
  process.stderr.write(`${path.relative(process.cwd(), svg)} from ${current.memory}\n`)
}
writeSummary()
process.stderr.write(`${path.relative(process.cwd(), path.join(IMAGES_DIR, 'summary.svg'))}\n`)
