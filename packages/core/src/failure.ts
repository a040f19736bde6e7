/**
 * The failure machinery around every store call: a deadline (one timer per limiter, not per call), a
 * circuit breaker, and the local deny cache. See docs/failure-modes.md.
 * @module
 */
import { costAt } from './cost'
import { StoreTimeoutError } from './errors'
import type { PairCost } from './types'

/** Monotonic milliseconds (performance.now exists in Node, Bun, Deno and workers). */
export const monotonicMs = (): number => performance.now()

const defer: (fn: () => void) => void =
  typeof setImmediate === 'function' ? (fn) => setImmediate(fn) : (fn) => setTimeout(fn, 0)

/**
 * Store replies that have arrived but are not yet handed to their callers: the batcher defers some by two
 * check phases (see `Batcher.settleSoon`). A deadline check waits for them, so a call Redis has answered
 * is never timed out (and sent to the failure policy after its spend was made) while its reply is held.
 */
let heldReplies = 0

/** The batcher holds (`+1`) or hands over (`-1`) one reply. */
export function holdReply(delta: 1 | -1): void {
  heldReplies += delta
}

/** What {@link Deadlines.guard} tells the caller's owner about one call, with that call's context. */
export interface CallWatch<C> {
  answered(context: C): void
  /** The error the caller sees, for the store's error or a {@link StoreTimeoutError}. */
  failed(error: unknown, context: C): unknown
}

/** A call nobody keeps books on: its error reaches the caller as it is. */
const UNWATCHED: CallWatch<undefined> = { answered() {}, failed: (error) => error }

interface Pending {
  readonly deadline: number
  settled: boolean
  reject(error: unknown): void
}

/**
 * Enforces one fixed deadline on many concurrent calls with a single timer: deadlines of a fixed
 * `timeoutMs` expire in the order calls started, so a FIFO queue suffices.
 */
export class Deadlines {
  private readonly queue: Pending[] = []
  private head = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  constructor(readonly timeoutMs: number) {}

  /** @internal Calls the queue still holds (in flight, or settled behind one in flight). */
  get queued(): number {
    return this.queue.length - this.head
  }

  /** Resolves like `promise`, or rejects with `StoreTimeoutError` after `timeoutMs`. The call is not retried. */
  run<T>(promise: Promise<T>): Promise<T> {
    return this.guard(promise, UNWATCHED, undefined)
  }

  /**
   * A store call under the deadline, with the limiter's bookkeeping done before the caller sees the
   * outcome: `answered` on a reply, `failed` (a timeout included) maps the error the caller gets. One
   * promise per call, where an `async` wrapper around {@link run} made two and a generator.
   */
  guard<T, C>(promise: Promise<T>, watch: CallWatch<C>, context: C): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = {
        deadline: monotonicMs() + this.timeoutMs,
        settled: false,
        reject: (error) => reject(watch.failed(error, context)),
      }
      this.queue.push(entry)
      if (this.timer === undefined) this.arm()
      promise.then(
        (value) => {
          if (entry.settled) return
          entry.settled = true
          this.trim()
          watch.answered(context)
          resolve(value)
        },
        (error) => {
          if (entry.settled) return
          entry.settled = true
          this.trim()
          entry.reject(error)
        },
      )
    })
  }

  /**
   * Drops the settled calls at the head of the queue as they settle (calls mostly settle in the order they
   * started), so the queue holds about the calls in flight, not every call of the last `timeoutMs`: at
   * 200,000 calls a second and a 5 s deadline that was a million entries, each keeping its promise's
   * resolving functions alive long enough to reach V8's old generation (a third of Node's time in GC).
   * The timer is left as it is: it fires at most once early, and re-arms for the new head.
   */
  private trim(): void {
    const q = this.queue
    let h = this.head
    while (h < q.length && q[h].settled) h++
    if (h === q.length) {
      q.length = 0
      h = 0
    } else if (h > 1024 && h * 2 > q.length) {
      q.splice(0, h)
      h = 0
    }
    this.head = h
  }

  private arm(): void {
    while (this.head < this.queue.length && this.queue[this.head].settled) this.head++
    if (this.head === this.queue.length) {
      this.queue.length = 0
      this.head = 0
      this.timer = undefined
      return
    }
    if (this.head > 1024) {
      this.queue.splice(0, this.head)
      this.head = 0
    }
    const wait = Math.max(0, this.queue[this.head].deadline - monotonicMs())
    // After an event-loop stall, timers run before the poll phase that would read replies already in the
    // socket: defer the check past one poll (setImmediate) so an answered call is not timed out.
    this.timer = setTimeout(() => defer(() => this.expire()), wait + 1)
    // Never keep a process alive just to time out a call.
    ;(this.timer as { unref?: () => void }).unref?.()
  }

  private expire(): void {
    if (heldReplies > 0) {
      defer(() => this.expire())
      return
    }
    const now = monotonicMs()
    while (this.head < this.queue.length) {
      const entry = this.queue[this.head]
      if (!entry.settled) {
        if (entry.deadline > now) break
        entry.settled = true
        entry.reject(new StoreTimeoutError(this.timeoutMs))
      }
      this.head++
    }
    this.arm()
  }
}

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

interface CachedDenial<D> {
  /** When the store refused (monotonic ms, taken before the call). */
  readonly at: number
  /** When this entry stops being used: the retry time, or `at + maxMs` if sooner. */
  readonly until: number
  readonly cost: PairCost
  readonly decision: D
  readonly bytes: number
}

// Heap bytes of one entry besides its signature and decision, measured on V8 (Node 20), rounded up.
const ENTRY_BYTES = 160

/**
 * Remembers refusals so a client hammering a closed gate costs no round trip. Only ever denies: an entry
 * is used for a cost at least as large as the refused one, and never past the refusal's retry time
 * measured from before the store call. It is also used for at most `maxMs`: a `reset()` in another process,
 * or keys deleted in Redis, is seen by every process within that. Bounded by entries and by bytes (the
 * caller charges each decision; signatures at two bytes a char): the oldest entry goes first, and as entries
 * live at most `maxMs`, the oldest is also about the first to expire.
 */
export class DenyCache<D> {
  private readonly entries = new Map<string, CachedDenial<D>>()
  private used = 0
  constructor(
    readonly maxEntries: number,
    readonly maxBytes: number,
    readonly maxMs: number,
  ) {}

  get(signature: string, cost: PairCost, now: number): CachedDenial<D> | undefined {
    const hit = this.entries.get(signature)
    if (!hit) return undefined
    if (hit.until <= now) {
      this.delete(signature)
      return undefined
    }
    // a refusal holds for a cost at least as large on every pair
    if (typeof cost === 'number' && typeof hit.cost === 'number') return cost >= hit.cost ? hit : undefined
    return atLeast(cost, hit.cost) ? hit : undefined
  }

  /**
   * Caches a refusal made at `at` (before the store call) that may be retried after `retryMs`.
   * `decisionBytes` is what the caller estimates the decision costs to keep.
   */
  set(
    signature: string,
    cost: PairCost,
    at: number,
    retryMs: number,
    decision: D,
    decisionBytes: number,
  ): void {
    this.delete(signature)
    const bytes = ENTRY_BYTES + 2 * signature.length + decisionBytes
    if (bytes > this.maxBytes) return
    const now = monotonicMs()
    for (const [key, entry] of this.entries) {
      if (entry.until > now && this.entries.size < this.maxEntries && this.used + bytes <= this.maxBytes)
        break
      this.delete(key)
    }
    this.entries.set(signature, { at, until: at + Math.min(retryMs, this.maxMs), cost, decision, bytes })
    this.used += bytes
  }

  delete(signature: string): void {
    const entry = this.entries.get(signature)
    if (!entry) return
    this.entries.delete(signature)
    this.used -= entry.bytes
  }

  get size(): number {
    return this.entries.size
  }

  /** Bytes charged against `maxBytes`. */
  get bytes(): number {
    return this.used
  }
}

/** Whether every pair's cost in `a` is at least its cost in `b`. */
function atLeast(a: PairCost, b: PairCost): boolean {
  const n = typeof a === 'number' ? (b as readonly number[]).length : a.length
  for (let i = 0; i < n; i++) if (costAt(a, i) < costAt(b, i)) return false
  return true
}
