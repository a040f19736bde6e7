/**
 * A job worker that calls a rate-limited upstream (say, a payment provider allowing 10 calls in any second
 * per merchant and 1,000 per hour per account). Before each call it waits for the shared limiter, so any
 * number of worker processes together stay within the upstream's limits and never see its 429s.
 */
import { type Decision, RateLimiter, RateLimitTimeoutError, type Store } from '@tollgate/core'

export interface Job {
  id: number
  merchant: string
}

/** The policies of the upstream, shared by every worker through Redis. */
export function upstreamLimiter(store: Store, prefix = 'upstream'): RateLimiter {
  return new RateLimiter({
    store,
    prefix,
    onStoreError: 'deny', // never flood the upstream when Redis is down: jobs wait and retry instead
    policies: {
      // A sliding log: at most 10 calls in ANY second, which is what an upstream counting a rolling
      // second enforces. (GCRA with burst 10 would allow its burst plus the refill: 19 in ~0.9 s.)
      perSecond: { limit: 10, window: '1s', algorithm: 'sliding-log' },
      perHour: { limit: 1000, window: '1h', algorithm: 'fixed-window' },
    },
  })
}

/**
 * Processes jobs one by one, waiting (exactly `retryAfterMs`, up to 10 s) for the budget before each call.
 * Returns the decisions that admitted each job, in order.
 */
export async function work(
  limiter: RateLimiter,
  jobs: AsyncIterable<Job> | Iterable<Job>,
  callUpstream: (job: Job) => Promise<void>,
): Promise<Decision[]> {
  const admitted: Decision[] = []
  for await (const job of jobs) {
    let decision: Decision
    try {
      decision = await limiter.wait(
        { perSecond: `merchant:${job.merchant}`, perHour: 'account:main' },
        { maxWaitMs: 10_000 },
      )
    } catch (error) {
      if (error instanceof RateLimitTimeoutError) {
        console.warn(`job ${job.id}: budget exhausted for 10 s, requeue it`)
        continue
      }
      throw error
    }
    admitted.push(decision)
    await callUpstream(job)
  }
  return admitted
}
