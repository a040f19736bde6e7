/**
 * Output helpers: durations as people read them (`24m16s`, `1h`, `850ms`) and tables with a header row
 * whose columns line up, as kubectl prints them.
 * @module
 */

const UNITS: ReadonlyArray<[string, number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
]

/** A calendar window as the CLI shows and reads it: `month@Europe/Berlin` (the zone after `@`). */
export interface CalendarLabel {
  unit: 'day' | 'week' | 'month' | 'year'
  timeZone: string
}

/** A policy's window for people: its calendar (`month@Europe/Berlin`) or its duration (`15m`). */
export function formatWindow(windowMs: number, calendar?: CalendarLabel): string {
  return calendar ? `${calendar.unit}@${calendar.timeZone}` : formatDuration(windowMs)
}

/** `day`, `week@Europe/Berlin`, ...: a calendar window, else undefined. */
export function parseCalendarWindow(text: string): CalendarLabel | undefined {
  const m = /^(day|week|month|year)(?:@(.+))?$/.exec(text)
  return m ? { unit: m[1] as CalendarLabel['unit'], timeZone: m[2] ?? 'UTC' } : undefined
}

/**
 * A duration in milliseconds as a short human string: zero parts are left out, milliseconds are kept
 * below a minute and rounded up above it (a reset time is never shown earlier than it is).
 * Negative or infinite: `never` (a cost the policy can never grant).
 *
 * @example
 * formatDuration(850)        // '850ms'
 * formatDuration(1500)       // '1.5s'
 * formatDuration(1_456_000)  // '24m16s'
 * formatDuration(3_600_000)  // '1h'
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return 'never'
  if (ms === 0) return '0s'
  if (ms < 1000) return `${Math.ceil(ms)}ms`
  if (ms < 60_000) {
    const whole = Math.ceil(ms)
    const frac = whole % 1000
    return frac === 0
      ? `${whole / 1000}s`
      : `${Math.floor(whole / 1000)}.${String(frac).padStart(3, '0').replace(/0+$/, '')}s`
  }
  let rest = Math.ceil(ms / 1000) * 1000
  let out = ''
  for (const [unit, size] of UNITS) {
    if (rest >= size) {
      out += `${Math.floor(rest / size)}${unit}`
      rest %= size
    }
  }
  return out
}

const PART = /(\d+(?:\.\d+)?)(ms|d|h|m|s)/y

/**
 * Parses what {@link formatDuration} prints, and the core's forms: `850ms`, `1.5s`, `15m`, `1h30m`,
 * `2d`, or a bare number of milliseconds. Undefined when the text is none of these or not a whole
 * number of milliseconds.
 *
 * @example
 * parseHumanDuration('24m16s') // 1_456_000
 */
export function parseHumanDuration(text: string): number | undefined {
  if (/^\d+$/.test(text)) return Number(text)
  if (text === '') return undefined
  let total = 0
  PART.lastIndex = 0
  while (PART.lastIndex < text.length) {
    const m = PART.exec(text)
    if (!m) return undefined
    const size = m[2] === 'ms' ? 1 : UNITS.find(([u]) => u === m[2])![1]
    // integers only: '0.1s' is 100 exactly, not 100.00000000000001
    const [int, frac = ''] = m[1]!.split('.')
    const scale = 10 ** frac.length
    const fracMs = (Number(frac || '0') * size) / scale
    if (!Number.isInteger(fracMs)) return undefined
    total += Number(int) * size + fracMs
  }
  return Number.isSafeInteger(total) ? total : undefined
}

/** Widens `widths` to fit `cells`. */
export function widen(widths: number[], cells: readonly string[]): void {
  cells.forEach((cell, i) => {
    widths[i] = Math.max(widths[i] ?? 0, cell.length)
  })
}

/** One row padded to `widths`, two spaces between columns, the last one not padded. */
export function alignRow(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
    .join('  ')
    .trimEnd()
}

/**
 * Rows as aligned columns under a header row.
 *
 * @example
 * table(['POLICY', 'USED'], [['ip', '2']]) // ['POLICY  USED', 'ip      2']
 */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string[] {
  const widths = header.map((h) => h.length)
  for (const r of rows) widen(widths, r)
  return [alignRow(header, widths), ...rows.map((r) => alignRow(r, widths))]
}
