/**
 * Sleeping in tests. `setTimeout(fn, ms)` counts from the event loop's cached time, which lags behind the
 * real clock after synchronous work, so it can wake a few ms early; a test that sleeps a limiter's
 * `retryAfterMs` must sleep at least that long or it tests the timer, not the limiter.
 * @module
 */

/** Resolves after at least `ms` milliseconds by the monotonic clock. */
export function sleepAtLeast(ms: number): Promise<void> {
  const until = performance.now() + ms
  return new Promise((resolve) => {
    const check = () => {
      const left = until - performance.now()
      if (left > 0) setTimeout(check, Math.ceil(left))
      else resolve()
    }
    setTimeout(check, ms)
  })
}
