/**
 * The circuit breaker that stops paying the deadline on every request while the store is down, and the
 * bounded set of breakers a limiter keeps per store scope (a cluster primary). See docs/failure-modes.md.
 * @module
 */
import { monotonicMs } from '../deadlines'

/** Breaker settings. */
export interface BreakerOptions {
  /** Consecutive failures that open the circuit. @default 3 */
  failures?: number
  /** How long it stays open before one probe call is let through. @default 1000 */
  cooldownMs?: number
}

export type BreakerState = 'closed' | 'open' | 'half-open'

/**
 * Stops paying the deadline on every request while the store is down: after `failures` consecutive
 * failures, calls skip the store for `cooldownMs`; then a single probe decides whether to close.
 */
export class CircuitBreaker {
  state: BreakerState = 'closed'
  private consecutive = 0
  private openedAt = 0
  private probing = false
  constructor(
    readonly failures: number,
    readonly cooldownMs: number,
    private readonly onChange: (state: BreakerState) => void,
  ) {}

  /**
   * Whether this call may go to the store (true for exactly one probe per cool-down). `readySince` is the
   * store's connection state when known (see `Store.readySince`): while it is not connected (-1) no probe
   * is sent, since it would fail at once and restart the cool-down; once it has reconnected after the
   * circuit opened, the probe goes at once instead of waiting out the cool-down.
   */
  allow(readySince?: number): boolean {
    if (this.state === 'closed') return true
    if (readySince !== undefined) {
      if (readySince < 0) return false
      if (this.state === 'open' && readySince > this.openedAt) this.set('half-open')
    }
    if (this.state === 'open' && monotonicMs() - this.openedAt >= this.cooldownMs) this.set('half-open')
    if (this.state === 'half-open' && !this.probing) {
      this.probing = true
      return true
    }
    return false
  }

  /** Milliseconds until the next probe (for Retry-After while open). */
  retryInMs(): number {
    return this.state === 'open'
      ? Math.max(1, Math.ceil(this.cooldownMs - (monotonicMs() - this.openedAt)))
      : this.cooldownMs
  }

  success(): void {
    this.consecutive = 0
    this.probing = false
    if (this.state !== 'closed') this.set('closed')
  }

  failure(): void {
    this.probing = false
    this.consecutive++
    if (this.state === 'half-open' || (this.state === 'closed' && this.consecutive >= this.failures)) {
      this.openedAt = monotonicMs()
      this.set('open')
    }
  }

  private set(state: BreakerState): void {
    this.state = state
    this.onChange(state)
  }
}

// Breakers kept per store scope (cluster primaries); scopes are node addresses, not request input.
const MAX_SCOPES = 1024
const MAX_SCOPE_BYTES = 512 * 1024
const SCOPE_BYTES = 320 // a breaker, its closure and the Map entry, besides the address

/**
 * A limiter's breakers: its own, for calls the store does not place, and one per store scope (a cluster
 * primary) with the same settings. At most 1,024 scopes and 512 KiB are kept, the oldest going first (a
 * cluster has far fewer primaries; addresses change only on failover).
 */
export class BreakerScopes {
  /** The breaker of calls the store does not place. */
  readonly main: CircuitBreaker
  private readonly scoped = new Map<string, CircuitBreaker>()
  private used = 0
  constructor(
    private readonly failures: number,
    private readonly cooldownMs: number,
    private readonly onChange: (state: BreakerState, scope: string | undefined) => void,
  ) {
    this.main = new CircuitBreaker(failures, cooldownMs, (state) => onChange(state, undefined))
  }

  /** The breaker of `scope` (created on first use), or the main one. */
  of(scope: string | undefined): CircuitBreaker {
    if (scope === undefined) return this.main
    let breaker = this.scoped.get(scope)
    if (breaker) return breaker
    const bytes = SCOPE_BYTES + 2 * scope.length
    if (bytes > MAX_SCOPE_BYTES) return this.main
    for (const old of this.scoped.keys()) {
      if (this.scoped.size < MAX_SCOPES && this.used + bytes <= MAX_SCOPE_BYTES) break
      this.scoped.delete(old)
      this.used -= SCOPE_BYTES + 2 * old.length
    }
    const onChange = this.onChange
    breaker = new CircuitBreaker(this.failures, this.cooldownMs, (state) => onChange(state, scope))
    this.scoped.set(scope, breaker)
    this.used += bytes
    return breaker
  }

  /** Scoped breakers kept. */
  get size(): number {
    return this.scoped.size
  }

  /** Bytes charged against the bound. */
  get bytes(): number {
    return this.used
  }

  /** Forgets every scoped breaker (for memory probes). @internal */
  clear(): void {
    this.scoped.clear()
    this.used = 0
  }
}
