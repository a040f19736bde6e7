import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { RedisStore } from '@tollgate/core'
import { clearOfBoundary, redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'
import { catalogue, points } from './server'

describe('example: a GraphQL catalogue priced by query cost', () => {
  it('a 300-product query settles to the 20 returned; the third is refused with 429 and its retry time', async () => {
    await clearOfBoundary(60_000, 5_000) // the one-minute window
    const redis = createClient({ url: redisUrl() }).on('error', () => undefined)
    await redis.connect()
    const limiter = points(new RedisStore(redis), `example-graphql-${process.pid}-${Date.now()}`)
    const server = createServer(catalogue(limiter)).listen(0, '127.0.0.1')
    await once(server, 'listening')
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`
    const post = (query: string) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ query }),
      })
    try {
      // estimated 1 + 300 x 3 = 901, settled to 1 + 20 x 3 = 61
      const query = '{ products(first: 300) { id name price } }'
      for (const left of [939, 878]) {
        const res = await post(query)
        expect(res.status).toBe(200)
        expect(res.headers.get('ratelimit')).toMatch(/^"points";r=\d+;t=\d+/)
        expect(((await res.json()) as { data: { products: unknown[] } }).data.products).toHaveLength(20)
        expect((await limiter.peek('127.0.0.1')).remaining).toBe(left)
      }
      const refused = await post(query) // 901 > 878
      expect(refused.status).toBe(429)
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      const body = (await refused.json()) as { errors: { extensions: Record<string, unknown> }[] }
      expect(body.errors[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', limit: 1000, remaining: 878 })
      // too costly for any budget: refused before the limiter, nothing spent
      const huge = await post('{ products(first: 2000) { id name price } }')
      expect(
        ((await huge.json()) as { errors: { extensions: { code: string } }[] }).errors[0]?.extensions.code,
      ).toBe('COST_LIMIT_EXCEEDED')
      expect((await limiter.peek('127.0.0.1')).remaining).toBe(878)
    } finally {
      server.close()
      await redis.quit()
    }
  })
})
