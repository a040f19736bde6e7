/** The failure policy: a store that is down, and request functions that never settle. */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { fail, freshPrefix, type SuiteContext } from './context'
import { REDUCED_CAPACITY, rateLimitFields } from './rate-limit-fields'
import { request } from './request'
import type { SuiteOptions } from './types'

export function describeStoreFailure(s: SuiteContext): void {
  const { limiter, start, get } = s
  describe('store failure', () => {
    // A store whose every call fails like a Redis that is down (the client rejects).
    const down = () =>
      new RateLimiter({
        store: new RedisStore({ evalsha: fail, eval: fail }),
        prefix: freshPrefix(),
        limit: 5,
        window: '1m',
      })

    it("onStoreError 'deny': 503 temporary-reduced-capacity with Retry-After, handler not run", async () => {
      const app = await start({
        app: { limiter: down(), onStoreError: 'deny' },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const res = await get(app, '/hello')
      expect(res.status).toBe(503)
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1)
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(res.json()).toMatchObject({ type: REDUCED_CAPACITY, status: 503 })
      expect(rateLimitFields(res)).toEqual([])
      expect(app.calls('/hello')).toBe(0)
    })

    // A key or cost function that never settles must not hang the request: the limiter's deadline ends it.
    describe('a key or cost function that never settles gets the failure policy at the deadline', () => {
      const never = () => new Promise<never>(() => undefined)
      const live = () => limiter({ limit: 5, window: '1m', timeoutMs: 100 })
      const cases: Array<[string, (l: RateLimiter) => SuiteOptions]> = [
        ['key', (l) => ({ limiter: l, key: never })],
        ['cost', (l) => ({ limiter: l, cost: never })],
      ]
      it.each(cases)("%s, under 'deny': 503 with Retry-After, handler not run", async (_, make) => {
        const app = await start({
          app: { ...make(live()), onStoreError: 'deny' },
          routes: [{ method: 'GET', path: '/hello' }],
        })
        const res = await request(app.url, '/hello', { giveUpMs: 10_000 })
        expect(res.status).toBe(503)
        expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1)
        expect(res.json()).toMatchObject({ type: REDUCED_CAPACITY, status: 503 })
        expect(rateLimitFields(res)).toEqual([])
        expect(app.calls('/hello')).toBe(0)
      })
      it.each(cases)("%s, under 'allow': 200 with no RateLimit headers", async (_, make) => {
        const app = await start({
          app: { ...make(live()), onStoreError: 'allow' },
          routes: [{ method: 'GET', path: '/hello' }],
        })
        const res = await request(app.url, '/hello', { giveUpMs: 10_000 })
        expect(res.status).toBe(200)
        expect(rateLimitFields(res)).toEqual([])
        expect(app.calls('/hello')).toBe(1)
      })
      it('a key function that throws is still a 500 (a bug, not an outage)', async () => {
        const app = await start({
          app: {
            limiter: live(),
            onStoreError: 'allow',
            key: async () => {
              throw new Error('bug in key')
            },
          },
          routes: [{ method: 'GET', path: '/hello' }],
        })
        const res = await request(app.url, '/hello', { giveUpMs: 10_000 })
        expect(res.status).toBe(500)
        expect(app.calls('/hello')).toBe(0)
      })
    })

    it("onStoreError 'allow': 200 with no RateLimit headers (quota never faked)", async () => {
      const app = await start({
        app: { limiter: down(), onStoreError: 'allow' },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const res = await get(app, '/hello')
      expect(res.status).toBe(200)
      expect(rateLimitFields(res)).toEqual([])
      expect(res.headers['retry-after']).toBeUndefined()
      expect(app.calls('/hello')).toBe(1)
    })
  })
}
