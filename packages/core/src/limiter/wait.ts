/**
 * `attempt()` and `wait()`: spending around a piece of work, and waiting until a spend is admitted.
 * @module
 */
import { monotonicMs } from '../deadlines'
import { InputError, RateLimitedError, RateLimitTimeoutError } from '../errors'
import { WAIT_CHANNEL, type WaitMessage } from '../events'
import type { CallOptions, Decision, KeyInput } from '../types'
import { checkCall, WAIT_OPTIONS } from './call-options'
import { rateRetryMs } from './decision'
import type { Attempt, WaitOptions } from './options'
import { ignoreStoreError } from './spend'

/**
 * What `attempt()` and `wait()` need of a limiter (`RateLimiter` passes itself): declared here so this
 * file does not import the limiter that imports it.
 */
export interface Spender {
  readonly name: string
  readonly prefix: string
  readonly leases: boolean
  consume(key: KeyInput, options?: CallOptions): Promise<Decision>
  refund(decision: Decision): Promise<void>
  release(decision: Decision): Promise<void>
}

/** See `RateLimiter.attempt`. */
export async function attempt<T>(
  limiter: Spender,
  key: KeyInput,
  fn: (attempt: Attempt) => T | Promise<T>,
  options: CallOptions | undefined,
): Promise<T> {
  // Checked before the spend: a callback that cannot run must not cost a unit.
  if (typeof fn !== 'function') throw new InputError('fn', 'a function of the attempt', fn)
  const decision = await limiter.consume(key, options)
  if (!decision.allowed) throw new RateLimitedError(decision)
  let pending: Promise<void> | undefined
  const handle: Attempt = {
    decision,
    refund: () => {
      pending ??= limiter.refund(decision)
      return pending
    },
  }
  if (!limiter.leases) {
    const result = await fn(handle)
    if (pending) await pending
    return result
  }
  try {
    const result = await fn(handle)
    if (pending) await pending
    return result
  } finally {
    await limiter.release(decision).catch(ignoreStoreError)
  }
}

/** See `RateLimiter.wait`. */
export async function wait(limiter: Spender, key: KeyInput, options: WaitOptions): Promise<Decision> {
  checkCall(options, WAIT_OPTIONS)
  const { maxWaitMs = 60_000, signal, jitter = 0, pollMs = 100, ...call } = options
  if (typeof maxWaitMs !== 'number' || Number.isNaN(maxWaitMs) || maxWaitMs < 0) {
    throw new InputError('maxWaitMs', 'a non-negative number', maxWaitMs)
  }
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) {
    throw new InputError('jitter', 'a number from 0 to 1', jitter)
  }
  if (typeof pollMs !== 'number' || !Number.isFinite(pollMs) || pollMs <= 0) {
    throw new InputError('pollMs', 'a positive number of milliseconds', pollMs)
  }
  if (
    signal !== undefined &&
    (typeof signal !== 'object' ||
      signal === null ||
      typeof signal.throwIfAborted !== 'function' ||
      typeof signal.addEventListener !== 'function')
  ) {
    throw new InputError('signal', 'an AbortSignal', signal)
  }
  let waited = 0
  let attempts = 0
  let outcome: WaitMessage['outcome'] = 'error'
  try {
    for (;;) {
      signal?.throwIfAborted()
      attempts++
      const decision = await limiter.consume(key, call)
      if (decision.allowed) {
        outcome = 'admitted'
        return decision
      }
      let retry = decision.retryAfterMs
      // Only concurrency refused: a slot frees when a holder releases, so poll (until maxWaitMs).
      if (limiter.leases && Number.isFinite(retry) && rateRetryMs(decision) === 0) {
        retry = Math.min(retry, pollMs, maxWaitMs - waited)
        if (retry <= 0) retry = Number.POSITIVE_INFINITY
      }
      if (!Number.isFinite(retry) || waited + retry > maxWaitMs) {
        outcome = 'timeout'
        throw new RateLimitTimeoutError(decision, maxWaitMs)
      }
      const ms =
        jitter > 0 ? Math.min(maxWaitMs - waited, retry + Math.floor(Math.random() * jitter * retry)) : retry
      await sleep(ms, signal)
      waited += ms
    }
  } catch (error) {
    if (outcome === 'error' && signal?.aborted) outcome = 'aborted'
    throw error
  } finally {
    if (WAIT_CHANNEL?.hasSubscribers) {
      const message: WaitMessage = {
        limiter: limiter.name,
        prefix: limiter.prefix,
        outcome,
        waitedMs: waited,
        attempts,
      }
      WAIT_CHANNEL.publish(message)
    }
  }
}

/**
 * Sleeps at least `ms` by the monotonic clock. `setTimeout` counts from the event loop's cached time,
 * which lags after synchronous work, so on its own it can wake a few ms early: too early to be admitted.
 */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  const until = monotonicMs() + ms
  return new Promise((resolve, reject) => {
    let timer = setTimeout(done, ms)
    function done() {
      const left = until - monotonicMs()
      if (left > 0) {
        timer = setTimeout(done, Math.ceil(left))
        return
      }
      signal?.removeEventListener('abort', abort)
      resolve()
    }
    function abort() {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', abort, { once: true })
  })
}
