/**
 * `tollgate top [--watch]`: the identities each policy refused most, from the top sets in Redis, with
 * each one's remaining budget. `--watch` redraws the table every interval: in place on a terminal (its
 * own lines only), a new table per interval otherwise.
 * @module
 */
import { type Connection, connect } from './connect'
import { type Description, describe } from './describe'
import { CliError, type Io } from './errors'
import { formatDuration, formatWindow, parseHumanDuration, table } from './format'
import { warnUnknownPrefix } from './identity'
import { readTop, type TopRow } from './top-read'

export interface TopFlags {
  url?: string
  cluster?: boolean
  config?: string
  prefix?: string
  secret?: string
  limit?: string
  policy?: string[]
  window?: string
  algorithm?: string
  burst?: string
  watch?: boolean
  interval?: string
  count?: string
  json?: boolean
}

/** The most rows a top set holds by default (a limiter's `top.maxIdentities`): the most `--limit` asks. */
const MAX_ROWS = 1000
const MIN_INTERVAL_MS = 100

export interface TopOptions {
  rows: number
  policies: string[]
  description: Description | undefined
  prefix: string
  secret: string | undefined
}

/** Checks the flags `top` (and the dashboard) share; usage errors exit 2. */
export async function topOptions(values: TopFlags): Promise<TopOptions> {
  let rows = 10
  if (values.limit !== undefined) {
    if (!/^\d+$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > MAX_ROWS)
      throw new CliError(
        `--limit ${values.limit}: expected how many rows, an integer from 1 to ${MAX_ROWS}`,
        2,
      )
    rows = Number(values.limit)
  }
  if (values.window || values.algorithm || values.burst)
    throw new CliError('top: --limit is the number of rows; describe limits with --policy or --config', 2)
  // `--policy name` picks a policy; `--policy name=limit[/window]` describes one (its remaining budget)
  const specs = values.policy ?? []
  const policies: string[] = []
  for (const spec of specs) {
    if (spec.includes('=')) continue
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(spec))
      throw new CliError(`--policy ${spec}: expected a policy name, or <name>=<limit>[/<window>]`, 2)
    policies.push(spec)
  }
  const described = specs.filter((s) => s.includes('='))
  const description = await describe({
    config: values.config,
    prefix: values.prefix,
    ...(described.length ? { policy: described } : {}),
  })
  for (const d of described) {
    const name = d.slice(0, d.indexOf('='))
    if (!policies.includes(name) && policies.length > 0) policies.push(name)
  }
  const secret = values.secret ?? (process.env.TOLLGATE_SECRET || undefined)
  if (secret !== undefined && secret.length < 16)
    throw new CliError(`--secret: the store's secret is at least 16 characters (given: ${secret.length})`, 2)
  return {
    rows,
    policies,
    description,
    prefix: description?.prefix ?? values.prefix ?? 'tollgate',
    secret,
  }
}

/** What a row shows and `--json` prints. */
export function topJson(row: TopRow) {
  const s = row.state
  return {
    policy: row.policy,
    windowMs: row.windowMs,
    identity: row.identity,
    refused: row.refused,
    limit: row.limit,
    used: s?.used,
    remaining: s?.remaining,
    resetMs: s?.resetMs,
    retryAfterMs:
      s?.retryAfterMs === undefined ? undefined : Number.isFinite(s.retryAfterMs) ? s.retryAfterMs : null,
  }
}

const HEADER = ['POLICY', 'LIMIT/WINDOW', 'IDENTITY', 'REFUSED', 'REMAINING', 'RESET']

function lines(rows: readonly TopRow[], prefix: string): string[] {
  if (rows.length === 0) return [`no refusals counted under prefix '${prefix}' in the last two windows`]
  return table(
    HEADER,
    rows.map((r) => {
      const s = r.state
      const window = s ? formatWindow(s.windowMs, s.calendar) : formatDuration(r.windowMs)
      return [
        r.policy,
        r.limit === undefined ? window : `${r.limit}/${window}`,
        r.identity,
        String(r.refused),
        s?.remaining !== undefined
          ? `${s.remaining}/${s.limit}`
          : s?.used !== undefined
            ? `used ${s.used}`
            : '-',
        s ? formatDuration(s.resetMs) : '-',
      ]
    }),
  )
}

/** `tollgate top`: resolves to the exit code. */
export async function top(values: TopFlags, io: Io): Promise<number> {
  const options = await topOptions(values)
  let interval = 1000
  if (values.interval !== undefined) {
    const ms = parseHumanDuration(values.interval)
    if (ms === undefined || ms < MIN_INTERVAL_MS)
      throw new CliError(
        `--interval ${values.interval}: expected a duration of at least ${MIN_INTERVAL_MS}ms, e.g. 500ms, 1s`,
        2,
      )
    interval = ms
  }
  let count = values.watch ? Number.POSITIVE_INFINITY : 1
  if (values.count !== undefined) {
    if (!values.watch) throw new CliError('--count goes with --watch', 2)
    if (!/^\d+$/.test(values.count) || Number(values.count) < 1)
      throw new CliError(`--count ${values.count}: expected a positive integer`, 2)
    count = Number(values.count)
  }
  const redis = await connect(values)
  try {
    const warned = new Set<string>()
    const warn = (line: string) => {
      if (warned.has(line)) return
      warned.add(line)
      io.err(line)
    }
    let drawn = 0
    const started = Date.now()
    for (let i = 0; i < count; i++) {
      if (i > 0) {
        // on a fixed schedule, so a slow read does not stretch every later interval
        const due = started + i * interval
        await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())))
      }
      const rows = await read(redis, options, warn)
      if (i === 0 && rows.length === 0) await warnUnknownPrefix({ redis, prefix: options.prefix }, io)
      if (values.json) {
        const doc = { prefix: options.prefix, at: new Date().toISOString(), top: rows.map(topJson) }
        io.out(JSON.stringify(doc))
        continue
      }
      const out = lines(rows, options.prefix)
      if (values.watch) out.unshift(`${new Date().toISOString().slice(11, 19)}  top of '${options.prefix}'`)
      // On a terminal, the previous table's lines are cleared and drawn over; the rest of the screen stays.
      if (io.tty && drawn > 0) out[0] = `\x1b[${drawn}F\x1b[J${out[0]}`
      else if (values.watch && i > 0) io.out('')
      for (const line of out) io.out(line)
      drawn = out.length
    }
    return 0
  } finally {
    await redis.close()
  }
}

function read(redis: Connection, o: TopOptions, warn: (line: string) => void): Promise<TopRow[]> {
  return readTop(redis, {
    prefix: o.prefix,
    limit: o.rows,
    policies: o.policies,
    description: o.description,
    secret: o.secret,
    warn,
  })
}
