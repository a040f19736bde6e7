/**
 * Runs two workers in this process against a fake upstream and prints when each call went out.
 * `REDIS_URL` (default redis://127.0.0.1:6379) is the shared store; start several copies of this file to
 * see them share the budget.
 */
import { RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { type Job, upstreamLimiter, work } from './worker'

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }).on('error', (err) =>
  console.warn('redis:', err.message),
)
redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
const limiter = upstreamLimiter(new RedisStore(redis))
const start = Date.now()
const jobs = (from: number): Job[] =>
  Array.from({ length: 15 }, (_, i) => ({ id: from + i, merchant: 'acme' }))
const upstream = async (job: Job) =>
  console.log(`+${String(Date.now() - start).padStart(5)} ms  job ${job.id}`)

const parallel = { parallel: 2 }
await Promise.all([work(limiter, jobs(0), upstream, parallel), work(limiter, jobs(100), upstream, parallel)])
console.log('30 jobs, at most 10 in any second for merchant acme and 3 in flight, across both workers')
await redis.quit()
