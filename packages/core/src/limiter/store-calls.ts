/**
 * Every store call of a limiter: under its deadline, behind the breaker of the call's scope, traced when
 * someone listens, with each outcome told to the breaker and the `onEvent` hook.
 * @module
 */
import { type CallWatch, Deadlines, type Expiring, type Settles, type SettlingStore } from '../deadlines'
import { InputError, StoreError, StoreTimeoutError } from '../errors'
import { emit, type StoreCallContext, storeTraced, type TollgateEvent, traceStore } from '../events'
import { storeFaultOf } from '../store-fault'
import type { PairCost, Store, StoreEntry, StoreReply } from '../types'
import { BreakerScopes, type CircuitBreaker } from './breaker'

type Watched = { breaker: CircuitBreaker; entries: readonly StoreEntry[] }

export class StoreCalls {
  readonly deadlines: Deadlines
  readonly breakers: BreakerScopes

  constructor(
    private readonly store: Store,
    readonly limiter: string,
    readonly prefix: string,
    private readonly onEvent: ((event: TollgateEvent) => void) | undefined,
    timeoutMs: number,
    breaker: { failures: number; cooldownMs: number },
  ) {
    this.deadlines = new Deadlines(timeoutMs)
    store.useDeadline?.(timeoutMs)
    this.breakers = new BreakerScopes(breaker.failures, breaker.cooldownMs, (state, scope) =>
      emit(onEvent, {
        type: 'breaker',
        limiter,
        prefix,
        state,
        ...(scope === undefined ? {} : { scope }),
      }),
    )
  }

  /** The breaker for a call: the store's scope for it (a cluster primary), or the limiter's own. */
  breakerFor(entries: readonly StoreEntry[]): CircuitBreaker {
    return this.breakers.of(this.store.scopeOf?.(entries))
  }

  /**
   * One store call under the deadline and the breaker. Throws a StoreError (or StoreTimeoutError) on
   * failure, and when the breaker is open without calling the store at all.
   */
  run<T>(
    entries: readonly StoreEntry[],
    run: () => Promise<T>,
    operation: StoreCallContext['operation'],
  ): Promise<T> {
    const breaker = this.breakerFor(entries)
    if (!this.admits(breaker)) return Promise.reject(circuitOpen())
    return this.deadlines.guard(this.start(entries, run, operation), this.watch, { breaker, entries })
  }

  /**
   * A consume's store call whose outcome goes to `call` itself ({@link WatchedCall}), under the deadline
   * counted from `startedMs` (the caller's monotonic reading just before) and the breaker.
   */
  consume(call: WatchedCall<StoreReply>, cost: PairCost, startedMs: number): void {
    const { breaker, entries } = call
    if (!this.admits(breaker)) {
      call.settled = true
      call.failed(circuitOpen())
      return
    }
    const timeoutMs = this.deadlines.timeoutMs
    call.deadline = startedMs + timeoutMs
    this.deadlines.track(call)
    const store = this.store as Store & Partial<SettlingStore>
    if (store.consumeTo !== undefined && !storeTraced()) {
      try {
        store.consumeTo(entries, cost, timeoutMs, call, startedMs)
      } catch (error) {
        call.reject(error)
      }
      return
    }
    this.start(entries, () => store.consume(entries, cost, timeoutMs), 'consume').then(
      (reply) => call.reply(reply),
      (error) => call.reject(error),
    )
  }

  /** Whether the breaker lets a call through (a half-open one: as its probe). */
  private admits(breaker: CircuitBreaker): boolean {
    return breaker.state === 'closed' || breaker.allow(this.store.readySince?.())
  }

  /** The store call, traced when someone listens; a synchronous throw becomes a rejection. */
  private start<T>(
    entries: readonly StoreEntry[],
    run: () => Promise<T>,
    operation: StoreCallContext['operation'],
  ): Promise<T> {
    try {
      return storeTraced()
        ? traceStore(
            { limiter: this.limiter, prefix: this.prefix, operation, pairs: entries.length, batchSize: 1 },
            run,
          )
        : run()
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** A store call's outcome, for its breaker and the events. Built once per limiter. */
  readonly watch: CallWatch<Watched> = {
    answered: ({ breaker }) => breaker.success(),
    failed: (error, { breaker, entries }) => {
      // Bad input a store refused is the caller's mistake, not an outage: it must reach the caller as
      // it is, never the failure policy (which could admit it).
      if (error instanceof InputError) return error
      const { limiter, prefix } = this
      if (error instanceof StoreTimeoutError) {
        breaker.failure()
        this.store.onTimeout?.(entries)
        emit(this.onEvent, { type: 'timeout', limiter, prefix, timeoutMs: error.timeoutMs })
        return error
      }
      const fault = storeFaultOf(error)
      // A data error is an answer: the store is reachable, so it closes the breaker like a success
      // rather than opening it for every identity.
      if (fault === 'data') breaker.success()
      else breaker.failure()
      emit(this.onEvent, { type: 'store-error', limiter, prefix, error, fault })
      return error instanceof StoreError
        ? error
        : new StoreError(String((error as Error)?.message ?? error), { cause: error })
    },
  }
}

/**
 * A store call that settles its owner's promise itself (the pipeline's consume): one object under the
 * deadline and the breaker, where {@link StoreCalls.run} adds a promise, its closures and a microtask
 * turn. Exactly one of `answered` (the reply) and `failed` (the error the caller sees, a timeout
 * included) runs, once.
 */
export abstract class WatchedCall<T> implements Expiring, Settles<T> {
  settled = false
  deadline = 0
  readonly breaker: CircuitBreaker

  constructor(
    private readonly calls: StoreCalls,
    readonly entries: readonly StoreEntry[],
  ) {
    this.breaker = calls.breakerFor(entries)
  }

  /** With the store's reply. */
  abstract answered(value: T): void
  /** With the error the caller sees. */
  abstract failed(error: unknown): void

  /** The store replied. */
  reply(value: T): void {
    if (this.settled) return
    this.calls.deadlines.settle(this)
    this.breaker.success()
    this.answered(value)
  }

  /** The store failed. */
  reject(error: unknown): void {
    if (this.settled) return
    this.calls.deadlines.settle(this)
    this.failed(this.calls.watch.failed(error, this))
  }

  timedOut(error: StoreTimeoutError): void {
    this.failed(this.calls.watch.failed(error, this))
  }
}

function circuitOpen(): StoreError {
  return new StoreError('circuit open: the store failed recently')
}
