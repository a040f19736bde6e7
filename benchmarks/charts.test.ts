/**
 * The benchmarks' current results, their charts and the docs agree: each current JSON is its report's
 * tables, each committed chart is what the chart code draws from that JSON, and docs/benchmarks.md names
 * the run each chart shows. No Redis, no timings.
 */
import fs from 'node:fs'
import path from 'node:path'
import { defined } from '@tollgate/testkit/checked'
import { chartOf, memoryScaleChart, renderSvg, summaryChart } from './lib/chart'
import { parseReport, type Results } from './lib/report-json'

const results = path.join(__dirname, 'results')
const images = path.join(__dirname, '..', 'docs', 'images')
const current: Record<string, string> = JSON.parse(
  fs.readFileSync(path.join(results, 'current.json'), 'utf8'),
)
const read = (file: string): Results => JSON.parse(fs.readFileSync(path.join(results, file), 'utf8'))

describe('benchmark results and charts', () => {
  it('has a current run of every benchmark the docs show', () => {
    expect(Object.keys(current).sort()).toEqual(
      ['cluster', 'compact-cost', 'core', 'edge', 'http', 'memory', 'observability', 'script-cost'].sort(),
    )
  })

  it.each(Object.entries(current))('%s: the JSON is its report’s tables', (bench, file) => {
    const json = read(file)
    const md = fs.readFileSync(path.join(results, json.report), 'utf8')
    expect(json).toEqual(parseReport(md, bench, json.report))
    expect(json.tables.length).toBeGreaterThan(0)
  })

  it.each(Object.entries(current))('%s: the committed chart is drawn from the JSON', (bench, file) => {
    const svg = fs.readFileSync(path.join(images, `${bench}.svg`), 'utf8')
    expect(svg).toBe(renderSvg(chartOf(read(file))))
  })

  it("the memory run's scale chart is drawn from its scale table", () => {
    const svg = fs.readFileSync(path.join(images, 'memory-scale.svg'), 'utf8')
    expect(svg).toBe(renderSvg(memoryScaleChart(read(defined(current.memory, 'the memory run')))))
  })

  it("the README's summary chart is drawn from the current core and HTTP runs", () => {
    const svg = fs.readFileSync(path.join(images, 'summary.svg'), 'utf8')
    expect(svg).toBe(
      renderSvg(
        summaryChart(
          read(defined(current.core, 'the core run')),
          read(defined(current.http, 'the HTTP run')),
        ),
      ),
    )
    expect(fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')).toContain(
      'docs/images/summary.svg',
    )
  })

  it('docs/benchmarks.md names the run of every chart, and shows the chart', () => {
    const doc = fs.readFileSync(path.join(__dirname, '..', 'docs', 'benchmarks.md'), 'utf8')
    for (const [bench, file] of Object.entries(current)) {
      expect(doc).toContain(read(file).report)
      expect(doc).toContain(`(images/${bench}.svg)`)
    }
  })

  it('reads numbers as numbers, the rest as written', () => {
    const t = parseReport(
      '## Run\n\nMachine: 2 × Test CPU\n\n| name | n | ratio | range |\n| --- | ---: | ---: | ---: |\n| a | **221,043** | 3.63× | 1–2 |\n',
      'core',
      'core-x.md',
    )
    expect(t.header).toEqual(['Machine: 2 × Test CPU'])
    expect(t.tables).toEqual([
      { heading: 'Run', columns: ['name', 'n', 'ratio', 'range'], rows: [['a', 221043, 3.63, '1–2']] },
    ])
  })
})
