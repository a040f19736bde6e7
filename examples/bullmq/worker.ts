/**
 * A BullMQ worker that keeps a per-tenant rate (say, 5 calls in any second per tenant, what a partner API
 * allows) across every worker process. A job over the budget is not failed and not retried blindly: it
 * is moved back to BullMQ's delayed set for exactly the time the limiter says it must wait, plus a little
 * jitter so jobs refused together do not all come back in the same millisecond.
 */
import { type Decision, RateLimiter, type Store } from '@tollgate/core'
import { DelayedError, type Job, UnrecoverableError, Worker } from 'bullmq'

export interface TenantJob {
  tenant: string
  n: number
}

/** The per-tenant policy, shared by every worker through Redis. */
export function tenantLimiter(store: Store, prefix = 'tenant-rate'): RateLimiter {
  return new RateLimiter({
    store,
    prefix,
    name: 'tenant-rate',
    // A sliding log: at most 5 in ANY second, what an upstream counting a rolling second enforces.
    limit: 5,
    window: '1s',
    algorithm: 'sliding-log',
    // Redis down: jobs are deferred (by the breaker's wait), never let through unchecked.
    onStoreError: 'deny',
  })
}

/** How long to defer a refused job: the exact retry time, plus up to `jitter` of it (0.2: up to a fifth more). */
export function deferMs(decision: Decision, jitter: number): number {
  return Math.ceil(decision.retryAfterMs * (1 + Math.random() * jitter))
}

export interface TenantWorkerOptions {
  /** The BullMQ queue. */
  queue: string
  /** BullMQ's Redis connection (its own; Tollgate's store may use another client). */
  connection: { url: string }
  limiter: RateLimiter
  /** Calls the rate-limited upstream for one admitted job. */
  run: (job: Job<TenantJob>) => Promise<unknown>
  /** Jobs processed at once by this worker. @default 5 */
  concurrency?: number
  /** Extra delay as a fraction of the retry time. @default 0.2 */
  jitter?: number
  /** Called when a job is deferred, with the delay. */
  onDefer?: (job: Job<TenantJob>, delayMs: number) => void
}

export function tenantWorker(options: TenantWorkerOptions): Worker<TenantJob> {
  const { limiter, run, jitter = 0.2, onDefer } = options
  return new Worker<TenantJob>(
    options.queue,
    async (job, token) => {
      const decision = await limiter.consume(`tenant:${job.data.tenant}`)
      if (!decision.allowed) {
        if (decision.retryAfterMs === Infinity) {
          // cost above the policy's capacity: waiting can never help
          throw new UnrecoverableError(`tenant ${job.data.tenant}: a job this large is never admitted`)
        }
        const delay = deferMs(decision, jitter)
        onDefer?.(job, delay)
        // Back to the delayed set, not a failure: no attempt is used up, no backoff guesswork.
        await job.moveToDelayed(Date.now() + delay, token)
        throw new DelayedError()
      }
      return run(job)
    },
    { connection: options.connection, concurrency: options.concurrency ?? 5 },
  )
}
