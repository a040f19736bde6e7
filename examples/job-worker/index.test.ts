import { RedisStore } from '@tollgate/core'
import { at, redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'
import { type Job, UPSTREAM_CONCURRENCY, upstreamLimiter, work } from './worker'

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
    const perHour = decisions.map((d) => at(d.policies, 1).remaining).sort((a, b) => b - a)
    expect(perHour).toEqual(Array.from({ length: 24 }, (_, i) => 999 - i)) // every call charged exactly once
    await Promise.all(clients.map((c) => c.quit()))
  }, 20_000)

  it('two workers running 4 calls each at once: never more than 3 calls in flight upstream', async () => {
    const clients = await Promise.all(
      [0, 1].map(() =>
        createClient({ url: redisUrl() })
          .on('error', () => {})
          .connect(),
      ),
    )
    const prefix = `jobs-inflight${Date.now()}`
    const limiters = clients.map((c) => upstreamLimiter(new RedisStore(c), prefix))
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {})
    let inFlight = 0
    let most = 0
    const done: number[] = []
    const jobs = (from: number): Job[] =>
      Array.from({ length: 8 }, (_, i) => ({ id: from + i, merchant: `m${from + i}` })) // no per-second wait
    await Promise.all(
      limiters.map((limiter, w) =>
        work(
          limiter,
          jobs(w * 100),
          async (job) => {
            most = Math.max(most, ++inFlight)
            await new Promise((resolve) => setTimeout(resolve, 15))
            inFlight--
            if (job.id % 5 === 0) throw new Error('upstream failed') // released all the same
            done.push(job.id)
          },
          { parallel: 4 },
        ),
      ),
    )
    expect(most).toBeLessThanOrEqual(UPSTREAM_CONCURRENCY)
    expect(done).toHaveLength(16 - 4) // ids 0, 5, 100, 105 failed upstream; every other job ran
    // every slot was released, the failed calls' too: nothing is left in flight
    const peek = await at(limiters, 0).peek({
      perSecond: 'merchant:m0',
      perHour: 'account:main',
      inFlight: 'account:main',
    })
    expect(at(peek.policies, 2).remaining).toBe(UPSTREAM_CONCURRENCY)
    expect(warn).toHaveBeenCalledTimes(4)
    warn.mockRestore()
    await Promise.all(clients.map((c) => c.quit()))
  }, 20_000)
})
