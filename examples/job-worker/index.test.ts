import { RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'
import { type Job, upstreamLimiter, work } from './worker'

describe('example: job workers sharing an upstream budget', () => {
  it('two workers on two connections process every job, together within the per-second policy', async () => {
    const clients = await Promise.all(
      [0, 1].map(() =>
        createClient({ url: redisUrl() })
          .on('error', () => {})
          .connect(),
      ),
    )
    const prefix = `jobs${Date.now()}`
    const limiters = clients.map((c) => upstreamLimiter(new RedisStore(c), prefix))
    const done: number[] = []
    const jobs = (from: number): Job[] =>
      Array.from({ length: 12 }, (_, i) => ({ id: from + i, merchant: 'acme' }))
    const results = await Promise.all(
      limiters.map((limiter, w) =>
        work(limiter, jobs(w * 100), async (job) => {
          done.push(job.id)
        }),
      ),
    )
    expect(done).toHaveLength(24)
    const decisions = results.flat()
    expect(decisions.every((d) => d.allowed && d.source === 'store')).toBe(true)
    // 24 calls against 10 in any second: at least 14 had to wait for the log to slide
    const perHour = decisions.map((d) => d.policies[1].remaining).sort((a, b) => b - a)
    expect(perHour).toEqual(Array.from({ length: 24 }, (_, i) => 999 - i)) // every call charged exactly once
    await Promise.all(clients.map((c) => c.quit()))
  }, 20_000)
})
