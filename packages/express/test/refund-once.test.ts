/**
 * Issue 9.2 through Express: a request refunded by `skipFailedRequests` and by the app itself (or any
 * two paths) gives its spend back once. Before, each refund gave one unit back, so a failing route
 * handed out other clients' spends (8 admitted against a limit of 5 below).
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { ALGORITHMS } from '@tollgate/core/scripts'
import { rateLimit } from '@tollgate/express'
import express from 'express'
import { createClient } from 'redis'
import request from 'supertest'

let redis: ReturnType<typeof createClient>
beforeAll(async () => {
  redis = createClient({ url: process.env.REDIS_URL })
  await redis.connect()
})
afterAll(async () => {
  await redis.quit()
})

it.each(ALGORITHMS)(
  '%s: skipFailedRequests plus the app refunding the same request: one refund',
  async (algorithm) => {
    const limiter = new RateLimiter({
      store: new RedisStore(redis),
      prefix: `express-once-${process.pid}-${algorithm}`,
      limit: 5,
      // a day, not a minute: a fixed window's boundary inside this ~0.5 s sequence would (rightly) give a
      // new budget
      window: '1d',
      algorithm,
      denyCache: false,
    })
    const app = express()
    app.use(rateLimit({ limiter, key: () => 'client', skipFailedRequests: true }))
    app.get('/ok', (_req, res) => {
      res.send('ok')
    })
    app.get('/fail', async (req: any, res) => {
      await limiter.refund(req.rateLimit) // the app gives it back too (e.g. shared error handling)
      res.status(500).send('fail')
    })
    let ok = 0
    const hit = async (path: string) => {
      const res = await request(app).get(path)
      if (path === '/ok' && res.status === 200) ok++
      // the adapter's refund runs once the response is finished: let it land before the next request
      await new Promise((resolve) => setTimeout(resolve, 20))
      return res.status
    }
    for (let i = 0; i < 3; i++) await hit('/ok')
    for (let i = 0; i < 3; i++) expect(await hit('/fail')).toBe(500)
    for (let i = 0; i < 5; i++) await hit('/ok')
    expect(ok).toBe(5)
  },
)
