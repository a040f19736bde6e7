/**
 * The measuring loop: a pool of `concurrency` async workers, each issuing its next call as soon as its
 * previous one settles, so exactly `concurrency` calls stay outstanding (no batches, no idle gaps while
 * the slowest call of a batch finishes). Counts every settled call as admitted, refused (from the store
 * or from Tollgate's in-process deny cache), a fallback (the limiter's store-failure policy answered, not
 * the store: not a decision) or an error, and records each call's latency as Node sees it (issue to
 * settle, queueing in the client included).
 * @module
 */

/** `cached`: a refusal answered by the in-process deny cache; `fallback`: by the store-failure policy. */
export type Outcome = 'admitted' | 'refused' | 'cached' | 'fallback'

/** One call of the system under test. `i` is a global sequence number (pick the key from it). Throw on error. */
export type Op = (i: number) => Promise<Outcome>

/** How a Tollgate decision counts: a fallback is not a decision; a refusal from the deny cache is its own kind. */
export function outcomeOf(d: {
  allowed: boolean
  source: 'store' | 'cache' | 'fallback' | 'reserve' | 'block' | 'allow'
}): Outcome {
  if (d.source === 'fallback') return 'fallback'
  if (d.allowed) return 'admitted'
  return d.source === 'cache' ? 'cached' : 'refused'
}

export interface MeasureOptions {
  /** Calls kept in flight. @default 256 */
  concurrency?: number
  /** How long to keep issuing new calls (calls in flight at the end are awaited and counted). */
  durationMs: number
  /** Keep issuing past `durationMs` until this many calls were issued. @default 0 */
  minCalls?: number
  /** Latencies kept for the percentiles (the first N calls). @default 1_000_000 */
  maxSamples?: number
}

export interface Measurement {
  /** Settled calls that were a decision (admitted + refused). */
  readonly decisions: number
  readonly admitted: number
  /** Refusals, the cached ones included. */
  readonly refused: number
  /** Refusals answered from the deny cache, without a store call. */
  readonly cached: number
  /** Answers of the store-failure policy (timeout, open breaker): not decisions, not counted in them. */
  readonly fallbacks: number
  readonly errors: number
  /** The first error, for the report. */
  readonly firstError?: unknown
  /** From the first issue to the last settle. */
  readonly elapsedMs: number
  /** decisions / elapsed seconds. */
  readonly perSecond: number
  /** Latency percentiles in ms over the recorded calls (NaN when none). */
  readonly p50Ms: number
  readonly p99Ms: number
}

/**
 * Runs `op` with `concurrency` calls in flight for `durationMs` (and at least `minCalls` calls), then
 * waits for the stragglers.
 */
export async function measure(op: Op, options: MeasureOptions): Promise<Measurement> {
  const concurrency = options.concurrency ?? 256
  const maxSamples = options.maxSamples ?? 1_000_000
  const lat = new Float64Array(maxSamples)
  let samples = 0
  let seq = 0
  let admitted = 0
  let refused = 0
  let cached = 0
  let fallbacks = 0
  let errors = 0
  let firstError: unknown
  const start = performance.now()
  const deadline = start + options.durationMs
  const minCalls = options.minCalls ?? 0

  async function worker(): Promise<void> {
    for (let t0 = performance.now(), n = 0; t0 < deadline || seq < minCalls; ) {
      try {
        const outcome = await op(seq++)
        if (outcome === 'admitted') admitted++
        else if (outcome === 'refused') refused++
        else if (outcome === 'cached') {
          refused++
          cached++
        } else fallbacks++
      } catch (error) {
        errors++
        if (firstError === undefined) firstError = error
      }
      let t1 = performance.now()
      if (samples < maxSamples) lat[samples++] = t1 - t0
      // Calls answered without I/O (deny cache, fallback) resolve in microtasks: yield now and then, or
      // 256 such loops starve timers and sockets for the whole run (as no real server's request loop does).
      if ((++n & 63) === 0) {
        await new Promise((resolve) => setImmediate(resolve))
        t1 = performance.now()
      }
      t0 = t1
    }
  }

  const workers = new Array<Promise<void>>(concurrency)
  for (let w = 0; w < concurrency; w++) workers[w] = worker()
  await Promise.all(workers)
  const elapsedMs = performance.now() - start
  const sorted = lat.subarray(0, samples).sort()
  const pct = (p: number) =>
    samples === 0 ? Number.NaN : sorted[Math.min(samples - 1, Math.floor(p * samples))]!
  const decisions = admitted + refused
  return {
    decisions,
    admitted,
    refused,
    cached,
    fallbacks,
    errors,
    firstError,
    elapsedMs,
    perSecond: decisions / (elapsedMs / 1000),
    p50Ms: pct(0.5),
    p99Ms: pct(0.99),
  }
}

/** Median of numbers (mean of the two middle ones for an even count). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/**
 * A micro-benchmark's rounds: every case warmed up once, then the cases alternate within each round, timed
 * by process CPU (not wall) time so a busy host's other work counts less. Prints the median ns per call and
 * each round's figure.
 */
export function timeCases(
  cases: readonly (readonly [string, () => void])[],
  rounds: number,
  calls: number,
): void {
  const cpuNs = () => {
    const { user, system } = process.cpuUsage()
    return (user + system) * 1000
  }
  for (const [, run] of cases) run()
  const results = cases.map(() => [] as number[])
  for (let r = 0; r < rounds; r++) {
    cases.forEach(([, run], i) => {
      const t0 = cpuNs()
      run()
      results[i]?.push((cpuNs() - t0) / calls)
    })
  }
  const width = Math.max(...cases.map(([name]) => name.length)) + 2
  cases.forEach(([name], i) => {
    const ns = results[i] ?? []
    console.log(
      `${name.padEnd(width)} ${median(ns).toFixed(0).padStart(6)} ns/call (rounds: ${ns.map((n) => n.toFixed(0)).join(' ')})`,
    )
  })
}
