/**
 * The dashboard's chart data: the server scrapes an app's Prometheus endpoint (as served with
 * `@tollgate/prometheus`) every few seconds and keeps the allowed and refused decisions per second of the
 * last minutes in a bounded ring. A failed scrape leaves a gap, not a zero.
 * @module
 */
import { CliError } from './errors'
import { type Counts, scrape } from './watch'

export interface RateSample {
  /** When the interval ended (ms since the epoch). */
  at: number
  /** Decisions per second over the interval, every limiter and policy summed. */
  allowed: number
  refused: number
}

export interface RatesAnswer {
  /** The endpoint sampled, or null: then `hint` says where the data would come from. */
  source: string | null
  intervalMs: number
  samples: RateSample[]
  /** The last scrape's error, if it failed. */
  error?: string
  hint?: string
}

/** Samples kept: five minutes at the default interval. */
const RING = 150

export class RateSampler {
  private readonly ring: RateSample[] = []
  private previous: { at: number; totals: Counts } | undefined
  private timer: ReturnType<typeof setInterval> | undefined
  private error: string | undefined

  constructor(
    private readonly url: string | undefined,
    readonly intervalMs: number,
  ) {}

  start(): void {
    if (this.url === undefined || this.timer !== undefined) return
    void this.sample()
    this.timer = setInterval(() => void this.sample(), this.intervalMs)
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
  }

  answer(): RatesAnswer {
    if (this.url === undefined)
      return {
        source: null,
        intervalMs: this.intervalMs,
        samples: [],
        hint: 'start the dashboard with --metrics <url>: the /metrics endpoint of an app using @tollgate/prometheus',
      }
    return {
      source: this.url,
      intervalMs: this.intervalMs,
      samples: [...this.ring],
      ...(this.error ? { error: this.error } : {}),
    }
  }

  private sampling = false

  private async sample(): Promise<void> {
    // one scrape at a time: an app slower than the interval is sampled less often, not piled up on
    if (this.sampling) return
    this.sampling = true
    try {
      await this.scrapeOnce()
    } finally {
      this.sampling = false
    }
  }

  private async scrapeOnce(): Promise<void> {
    const url = this.url as string
    let totals: Counts
    try {
      totals = { allowed: 0, refused: 0, shadowRefused: 0 }
      for (const c of (await scrape(url, undefined)).values()) {
        totals.allowed += c.allowed
        totals.refused += c.refused
      }
      this.error = undefined
    } catch (error) {
      this.error = error instanceof CliError ? error.message : String(error)
      this.previous = undefined
      return
    }
    const at = Date.now()
    const before = this.previous
    this.previous = { at, totals }
    if (!before) return
    const seconds = Math.max(at - before.at, 1) / 1000
    // a counter that went down is a restarted app: its whole value is this interval's
    const delta = (now: number, then: number) => (now < then ? now : now - then)
    this.ring.push({
      at,
      allowed: delta(totals.allowed, before.totals.allowed) / seconds,
      refused: delta(totals.refused, before.totals.refused) / seconds,
    })
    if (this.ring.length > RING) this.ring.shift()
  }
}
