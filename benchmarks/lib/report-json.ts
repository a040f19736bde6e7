/**
 * A markdown report's tables as JSON (no file access: the benchmarks, charts.mts and the tests share it).
 * @module
 */

export interface Table {
  /** The nearest heading above the table, without its `#`s. */
  heading: string
  columns: string[]
  /** One array per row: a cell that is a plain number (thousands separators, a trailing ×) is a number. */
  rows: (string | number)[][]
}

export interface Results {
  /** `core`, `http`, `memory`, `cluster`, `edge`, `script-cost`, `observability`. */
  bench: string
  /** The markdown report's file name (it holds the run's date). */
  report: string
  /** The report's first heading. */
  title: string
  /** The report's prose lines before its first table: the machine, the versions, the knobs. */
  header: string[]
  tables: Table[]
}

/** A cell as JSON: numbers as numbers (`**221,043**`, `3.63×`, `1.00x`), the rest as written. */
function cell(raw: string): string | number {
  const text = raw.trim().replace(/^\*\*(.*)\*\*$/, '$1')
  const n = /^-?[\d,]*\.?\d+\s*[×x]?$/.test(text) ? Number(text.replace(/[,×x\s]/g, '')) : Number.NaN
  return Number.isFinite(n) ? n : text
}

const splitRow = (line: string) =>
  line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim())

/** Reads the tables of a markdown report. */
export function parseReport(md: string, bench: string, report: string): Results {
  const lines = md.split('\n')
  const tables: Table[] = []
  const header: string[] = []
  let title = ''
  let heading = ''
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const h = /^#+\s+(.*)$/.exec(line)
    if (h) {
      heading = h[1]!.trim()
      if (!title) title = heading
      continue
    }
    const isTable = line.trim().startsWith('|') && /^\s*\|[\s:|-]+\|\s*$/.test(lines[i + 1] ?? '')
    if (!isTable) {
      if (tables.length === 0 && line.trim()) header.push(line.trim())
      continue
    }
    const columns = splitRow(line)
    const rows: (string | number)[][] = []
    for (i += 2; i < lines.length && lines[i]!.trim().startsWith('|'); i++)
      rows.push(splitRow(lines[i]!).map(cell))
    i--
    tables.push({ heading, columns, rows })
  }
  return { bench, report, title, header, tables }
}
