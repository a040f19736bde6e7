/**
 * A job worker that calls a rate-limited upstream (say, a payment provider allowing 10 calls in any second
 * per merchant, 1,000 per hour per account, and at most 3 calls of one account in flight at once). Before
 * each call it waits for the shared limiter, so any number of worker processes together stay within the
 * upstream's limits and never see its 429s.
 */
import { type Decision, RateLimiter, RateLimitTimeoutError, type Store } from '@tollgate/core'

export interface Job {
  id: number
  merchant: string
}

/** Calls of one account the upstream serves at once. */
export const UPSTREAM_CONCURRENCY = 3

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
      // Calls in flight, across every worker: a slot is taken with the rate (one atomic call, all or
      // nothing) and released when the call ends; a worker that crashes mid-call frees it after 30 s.
      inFlight: { concurrency: UPSTREAM_CONCURRENCY, lease: '30s' },
    },
  })
}

/**
 * Processes jobs, `parallel` at a time, waiting (up to 10 s) for the budget and a free slot before each
 * call and releasing the slot when the call ends, whether it succeeded or threw (a failed job is logged
 * for requeueing). Returns the decisions that admitted each job.
 */
export async function work(
  limiter: RateLimiter,
  jobs: AsyncIterable<Job> | Iterable<Job>,
  callUpstream: (job: Job) => Promise<void>,
  { parallel = 1 }: { parallel?: number } = {},
): Promise<Decision[]> {
  const admitted: Decision[] = []
  const queue: AsyncIterator<Job> =
    Symbol.asyncIterator in jobs
      ? jobs[Symbol.asyncIterator]()
      : (async function* () {
          yield* jobs
        })()
  const loop = async () => {
    for (let next = await queue.next(); !next.done; next = await queue.next()) {
      const job = next.value
      let decision: Decision
      try {
        decision = await limiter.wait(
          { perSecond: `merchant:${job.merchant}`, perHour: 'account:main', inFlight: 'account:main' },
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
      try {
        await callUpstream(job)
      } catch (error) {
        console.warn(`job ${job.id}: ${(error as Error).message}, requeue it`) // the worker goes on
      } finally {
        await limiter.release(decision) // the slot is free for every worker again, failed call or not
      }
    }
  }
  await Promise.all(Array.from({ length: parallel }, loop))
  return admitted
}
