/**
 * A policy with `reserve` behind Express: the RateLimit headers count down as without it (the store's
 * remaining plus the units this process holds, never negative), 429 once the limit is spent, and a
 * skipped failure gives its unit back.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import { clearOfBoundary } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import express from 'express'
import { createClient } from 'redis'
import request from 'supertest'

const DAY = 86_400_000
let redis: ReturnType<typeof createClient>

beforeAll(async () => {
  redis = createClient({ url: process.env.REDIS_URL })
  await redis.connect()
})
afterAll(async () => {
  await redis.quit()
})

/** The `r` (remaining) of an ietf RateLimit header. */
const remainingOf = (header: string | undefined) => Number(/;r=(\d+);/.exec(header ?? '')?.[1])

it('RateLimit headers stay sane with a reserved policy, 429 after the limit', async () => {
  await clearOfBoundary(DAY, 60_000)
  const limiter = new RateLimiter({
    store: new RedisStore(redis),
    prefix: uniquePrefix('express-reserve'),
    limit: 12,
    window: DAY,
    algorithm: 'fixed-window',
    reserve: 5,
  })
  const app = express()
  app.use(rateLimit({ limiter, skipFailedRequests: true }))
  app.get('/', (_req, res) => res.send('ok'))
  app.get('/fail', (_req, res) => res.status(500).send('no'))
  const statuses: number[] = []
  const remaining: number[] = []
  for (let i = 0; i < 3; i++) await request(app).get('/fail').expect(500)
  for (let i = 0; i < 14; i++) {
    const res = await request(app).get('/')
    statuses.push(res.status)
    remaining.push(remainingOf(res.headers.ratelimit))
  }
  expect(statuses).toEqual([...new Array(12).fill(200), 429, 429])
  expect(remaining).toEqual([11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0])
})
