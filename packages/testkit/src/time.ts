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

/**
 * When fewer than `marginMs` are left before the next boundary of an epoch-aligned window of `windowMs`,
 * waits until just past it. For tests whose numbers assume that no aligned window boundary falls inside
 * them: a fixed window rightly starts a new count there, so a test of a few hundred ms that uses
 * minute-long fixed windows fails about once in a few hundred runs without this. Redis and the test share
 * the machine's clock.
 */
export async function clearOfBoundary(windowMs = 60_000, marginMs = 3_000): Promise<void> {
  const left = windowMs - (Date.now() % windowMs)
  if (left < marginMs) await sleepAtLeast(left + 5)
}

/**
 * Whether the machine's clock crossed a boundary of an epoch-aligned window of `windowMs` since
 * `startedMs` (a `Date.now()`): a round of calls between the two may rightly have met a fixed window's new
 * count. Redis and the test share the machine's clock.
 */
export function crossedBoundary(startedMs: number, windowMs: number): boolean {
  return Math.floor(startedMs / windowMs) !== Math.floor(Date.now() / windowMs)
}
