/**
 * Every store call of a limiter: under its deadline, behind the breaker of the call's scope, traced when
 * someone listens, with each outcome told to the breaker and the `onEvent` hook.
 * @module
 */
import { type CallWatch, Deadlines } from '../deadlines'
import { InputError, StoreError, StoreTimeoutError } from '../errors'
import { emit, type StoreCallContext, storeTraced, type TollgateEvent, traceStore } from '../events'
import { storeFaultOf } from '../store-fault'
import type { Store, StoreEntry } from '../types'
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
   * failure, and when the breaker is open without calling the store at all. `startedMs`: the caller's
   * monotonic reading just before (0: the deadline reads the clock).
   */
  run<T>(
    entries: readonly StoreEntry[],
    run: () => Promise<T>,
    operation: StoreCallContext['operation'],
    startedMs = 0,
  ): Promise<T> {
    const breaker = this.breakerFor(entries)
    if (breaker.state !== 'closed' && !breaker.allow(this.store.readySince?.())) {
      return Promise.reject(new StoreError('circuit open: the store failed recently'))
    }
    let promise: Promise<T>
    try {
      promise = storeTraced()
        ? traceStore(
            { limiter: this.limiter, prefix: this.prefix, operation, pairs: entries.length, batchSize: 1 },
            run,
          )
        : run()
    } catch (error) {
      promise = Promise.reject(error)
    }
    return this.deadlines.guard(promise, this.watch, { breaker, entries }, startedMs)
  }

  /** A store call's outcome, for its breaker and the events. Built once per limiter. */
  private readonly watch: CallWatch<Watched> = {
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
