/**
 * `tollgate watch`: samples an app's Prometheus `/metrics` (as served with `@tollgate/prometheus`) and
 * prints, for each interval, the decisions per limiter and policy: a header row, then one row per
 * limiter and policy per sample, like vmstat (`--count N` = N samples). A scrape that fails is one
 * line on stderr and the watch goes on (an app restarting is what one watches for); the exit code is 1
 * only when no scrape succeeded.
 * @module
 */
import { CliError, type Io } from './errors'
import { alignRow, parseHumanDuration, widen } from './format'

export interface WatchFlags {
  metrics?: string
  limiter?: string
  interval?: string
  count?: string
  json?: boolean
}

/** Shortest interval: a bare number is milliseconds, and `--interval 2` must not scrape an app 500 times a second. */
const MIN_INTERVAL_MS = 100

const HEADER = ['TIME', 'LIMITER', 'POLICY', 'ALLOWED', 'REFUSED', 'SHADOW-REFUSED']

export interface Counts {
  allowed: number
  refused: number
  shadowRefused: number
}

/** Polls a /metrics endpoint and prints the decisions of each interval; resolves to the exit code. */
export async function watch(values: WatchFlags, io: Io): Promise<number> {
  const url = values.metrics
  if (!url)
    throw new CliError('watch: give --metrics <url> (an endpoint serving @tollgate/prometheus metrics)', 2)
  try {
    new URL(url)
  } catch {
    throw new CliError(`--metrics '${url}' is not a URL`, 2)
  }
  const interval = values.interval === undefined ? 1000 : parseHumanDuration(values.interval)
  if (interval === undefined || interval < MIN_INTERVAL_MS) {
    throw new CliError(
      `--interval ${values.interval}: expected a duration of at least ${MIN_INTERVAL_MS}ms, e.g. 500ms, 1s, 1m`,
      2,
    )
  }
  let count = Number.POSITIVE_INFINITY
  if (values.count !== undefined) {
    if (!/^\d+$/.test(values.count) || Number(values.count) < 1) {
      throw new CliError(`--count ${values.count}: expected a positive integer`, 2)
    }
    count = Number(values.count)
  }
  const json = values.json === true
  const only = values.limiter
  // Each series' first row needs a previous total: a first scrape before the first interval.
  let previous = await tryScrape(url, only, io)
  let scraped = previous !== undefined
  const started = Date.now()
  const widths = HEADER.map((h) => h.length)
  let headed = false
  let lastOk = 0
  for (let i = 1; i <= count; i++) {
    // On a fixed schedule, so a slow scrape does not stretch every later interval.
    const due = started + i * interval
    await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())))
    const current = await tryScrape(url, only, io)
    if (current === undefined) continue
    scraped = true
    if (previous === undefined) {
      // No totals to subtract yet: this scrape is the baseline, not an interval's counts.
      previous = current
      lastOk = i
      continue
    }
    // After a failed scrape the counts span every interval since the last one that succeeded.
    const spanMs = (i - lastOk) * interval
    lastOk = i
    const at = new Date().toISOString()
    const rows: Array<{ limiter: string; policy: string } & Counts> = []
    for (const [series, now] of current) {
      const before = previous.get(series)
      const [limiter = '', policy = ''] = series.split('\n')
      rows.push({
        limiter,
        policy,
        // a counter that went down is a restarted app: its whole value is this interval's
        allowed: delta(now.allowed, before?.allowed),
        refused: delta(now.refused, before?.refused),
        shadowRefused: delta(now.shadowRefused, before?.shadowRefused),
      })
    }
    // A sample with no series yet (no decision made since the app started) is still a row.
    if (rows.length === 0)
      rows.push({ limiter: only ?? '-', policy: '-', allowed: 0, refused: 0, shadowRefused: 0 })
    if (json) {
      for (const r of rows) io.out(JSON.stringify({ at, ...r, intervalMs: spanMs }))
    } else {
      const lines = rows.map((r) => [
        at.slice(11, 19),
        r.limiter,
        r.policy,
        String(r.allowed),
        String(r.refused),
        String(r.shadowRefused),
      ])
      // Rows print as they come: the columns are as wide as the header and the first sample, and widen
      // when a later row needs it.
      if (!headed) {
        headed = true
        for (const cells of lines) widen(widths, cells)
        io.out(alignRow(HEADER, widths))
      }
      for (const cells of lines) {
        widen(widths, cells)
        io.out(alignRow(cells, widths))
      }
    }
    previous = current
  }
  return scraped ? 0 : 1
}

/** One scrape, or undefined after a line on stderr when it failed. */
async function tryScrape(
  url: string,
  only: string | undefined,
  io: Io,
): Promise<Map<string, Counts> | undefined> {
  try {
    return await scrape(url, only)
  } catch (error) {
    if (!(error instanceof CliError)) throw error
    io.err(`${new Date().toISOString().slice(11, 19)} scrape failed: ${error.message}`)
    return undefined
  }
}

function delta(now: number, before: number | undefined): number {
  return before === undefined || now < before ? now : now - before
}

const SAMPLE = /^(\w*decisions_total)\{([^}]*)\} ([0-9.eE+-]+)$/
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g

/** `limiter\npolicy` -> counts by outcome, summed over sources. */
export async function scrape(url: string, only: string | undefined): Promise<Map<string, Counts>> {
  let text: string
  try {
    const res = await fetch(url)
    if (!res.ok) throw new CliError(`--metrics ${url}: HTTP ${res.status}`)
    text = await res.text()
  } catch (error) {
    if (error instanceof CliError) throw error
    throw new CliError(
      `--metrics ${url}: ${(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message}`,
    )
  }
  const out = new Map<string, Counts>()
  for (const line of text.split('\n')) {
    const m = SAMPLE.exec(line)
    if (!m) continue
    const labels = Object.fromEntries([...m[2]!.matchAll(LABEL)].map((l) => [l[1], l[2]]))
    // Other counters match the name too (`fallback_decisions_total` has no policy): not a policy's row.
    if (labels.limiter === undefined || labels.policy === undefined) continue
    if (only !== undefined && labels.limiter !== only) continue
    const key = `${labels.limiter}\n${labels.policy}`
    let counts = out.get(key)
    if (!counts) {
      counts = { allowed: 0, refused: 0, shadowRefused: 0 }
      out.set(key, counts)
    }
    const n = Number(m[3])
    if (labels.outcome === 'allowed') counts.allowed += n
    else if (labels.outcome === 'refused') counts.refused += n
    else if (labels.outcome === 'shadow_refused') counts.shadowRefused += n
  }
  return out
}
