/**
 * The deadline of every store call: one timer per limiter, not per call, and the monotonic clock the
 * limiter, the stores and the breaker read. See docs/failure-modes.md.
 * @module
 */
import { StoreTimeoutError } from './errors'
import type { PairCost, StoreEntry, StoreReply } from './types'

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

/** Where a store call's outcome goes when it settles no promise of its own: the reply, or the error. */
export interface Settles<T> {
  reply(value: T): void
  reject(error: unknown): void
}

/** A store that can hand a consume's outcome to the limiter's call object (RedisStore). */
export interface SettlingStore {
  consumeTo(
    entries: readonly StoreEntry[],
    cost: PairCost,
    timeoutMs: number | undefined,
    to: Settles<StoreReply>,
    startedMs: number,
  ): void
}

/** One call in the queue: its deadline, whether it has settled, and what a timeout does to it. */
export interface Expiring {
  readonly deadline: number
  settled: boolean
  /** Its deadline passed first (`settled` is already set). */
  timedOut(error: StoreTimeoutError): void
}

/**
 * One call in the queue. A class, not an object literal: V8 may start allocating a literal's objects
 * straight in the old generation once enough of them outlive a scavenge (these do, queued behind a slower
 * call), and each would then keep its call's closures and entries alive until the next full GC.
 */
class Pending implements Expiring {
  settled = false
  constructor(
    readonly deadline: number,
    readonly reject: (error: unknown) => void,
  ) {}

  timedOut(error: StoreTimeoutError): void {
    this.reject(error)
  }
}

/**
 * Enforces one fixed deadline on many concurrent calls with a single timer: deadlines of a fixed
 * `timeoutMs` expire in the order calls started, so a FIFO queue suffices.
 */
export class Deadlines {
  private readonly queue: Expiring[] = []
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
      const entry = new Pending(monotonicMs() + this.timeoutMs, (error) =>
        reject(watch.failed(error, context)),
      )
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
   * Puts `call` under the deadline: its `timedOut` gets a {@link StoreTimeoutError} unless it has settled
   * (see {@link settle}) by `call.deadline`. For a caller that settles its own promise, where
   * {@link guard} would add one.
   */
  track(call: Expiring): void {
    this.queue.push(call)
    if (this.timer === undefined) this.arm()
  }

  /** Marks a tracked call settled: a later timeout passes it by. */
  settle(call: Expiring): void {
    call.settled = true
    this.trim()
  }

  /**
   * Drops the settled calls at the head of the queue as they settle (calls mostly settle in the order they
   * started), so the queue holds about the calls in flight, not every call of the last `timeoutMs`: at a
   * high call rate those entries, each keeping its promise's resolving functions alive, would live long
   * enough to reach V8's old generation and cost the process its time in GC.
   * The timer is left as it is: it fires at most once early, and re-arms for the new head.
   */
  private trim(): void {
    const q = this.queue
    let h = this.head
    while (h < q.length && q[h]!.settled) h++
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
    while (this.head < this.queue.length && this.queue[this.head]!.settled) this.head++
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
    const wait = Math.max(0, this.queue[this.head]!.deadline - monotonicMs())
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
      const entry = this.queue[this.head]!
      if (!entry.settled) {
        if (entry.deadline > now) break
        entry.settled = true
        entry.timedOut(new StoreTimeoutError(this.timeoutMs))
      }
      this.head++
    }
    this.arm()
  }
}
