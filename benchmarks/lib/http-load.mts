/**
 * One load run with autocannon, reduced to what the HTTP benchmark reports, with every response status
 * counted so a table can never hide errors.
 * @module
 */
// autocannon ships no types; the few fields used are typed below.
// @ts-expect-error no declaration file
import autocannon from 'autocannon'

export interface LoadOptions {
  /** Open connections, each with one request in flight. @default 50 */
  connections?: number
  /** Seconds (fractions allowed). */
  durationS: number
  path?: string
  /**
   * Send this header with a different one of `identities` values on each request (`user:0` …), in turn,
   * so a limiter keyed on it sees that many identities.
   */
  identityHeader?: string
  /** @default 10000 */
  identities?: number
}

export interface LoadRun {
  /** Completed requests per second over the run. */
  readonly rps: number
  readonly total: number
  readonly durationS: number
  /** Latency percentiles in ms (autocannon records whole milliseconds). */
  readonly p50Ms: number
  readonly p99Ms: number
  /** Status code to count. */
  readonly statuses: Record<string, number>
  /** Connection errors and timeouts (no response). */
  readonly errors: number
  readonly timeouts: number
}

interface AutocannonResult {
  duration: number
  errors: number
  timeouts: number
  statusCodeStats: Record<string, { count: number }>
  latency: { p50: number; p99: number }
  requests: { total: number }
}

/** Runs autocannon against `baseUrl` + `path` (default `/hello`). */
export async function load(baseUrl: string, options: LoadOptions): Promise<LoadRun> {
  const header = options.identityHeader
  const identities = options.identities ?? 10_000
  let next = 0
  const result: AutocannonResult = await autocannon({
    url: baseUrl + (options.path ?? '/hello'),
    connections: options.connections ?? 50,
    pipelining: 1,
    duration: options.durationS,
    ...(header
      ? {
          requests: [
            {
              setupRequest: (req: { headers?: Record<string, string> }) => {
                next = (next + 1) % identities
                return { ...req, headers: { ...req.headers, [header]: `user:${next}` } }
              },
            },
          ],
        }
      : {}),
  })
  const statuses: Record<string, number> = {}
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statuses[code] = count
  const total = Object.values(statuses).reduce((a, b) => a + b, 0)
  return {
    rps: total / result.duration,
    total,
    durationS: result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    statuses,
    errors: result.errors,
    timeouts: result.timeouts,
  }
}

/** Responses whose status is not `expected` (plus errors and timeouts), or an empty string when none. */
export function unexpected(run: LoadRun, expected: number): string {
  const bad = Object.entries(run.statuses)
    .filter(([code]) => Number(code) !== expected)
    .map(([code, n]) => `${n} × ${code}`)
  if (run.errors) bad.push(`${run.errors} connection errors`)
  if (run.timeouts) bad.push(`${run.timeouts} timeouts`)
  return bad.join(', ')
}

/** `200 × 123,456, 429 × 7`. */
export function formatStatuses(statuses: Record<string, number>): string {
  return Object.entries(statuses)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([code, n]) => `${code} × ${n.toLocaleString('en-US')}`)
    .join(', ')
}
