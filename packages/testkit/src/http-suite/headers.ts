/** Counting and the RateLimit fields: admissions, refusals, every header format, byte for byte. */
import { partitionKey } from '@tollgate/http'
import { sleepAtLeast } from '../time'
import type { SuiteContext } from './context'
import { exact, limitItem, policyItem, QUOTA_EXCEEDED, rateLimitFields } from './rate-limit-fields'

export function describeLimitsAndHeaders(s: SuiteContext): void {
  const { limiter, start, get, statuses } = s
  describe('limits and headers', () => {
    it('admits N, then 429 with byte-exact ietf headers; the handler does not run', async () => {
      // gcra: t is exact (the emission interval times units spent), so every byte is known.
      const api = limiter({ limit: 3, window: '60s', algorithm: 'gcra' })
      const app = await start({ routes: [{ method: 'GET', path: '/hello' }], app: { limiter: api } })
      const seen: string[] = []
      for (const [r, t] of [
        [2, 20],
        [1, 40],
        [0, 60],
      ] as const) {
        const res = await get(app, '/hello')
        expect(res.status).toBe(200)
        expect(res.headers['ratelimit-policy']).toMatch(exact(policyItem('default', 3, 60)))
        expect(res.headers.ratelimit).toMatch(exact(limitItem('default', r, t)))
        expect(res.headers['retry-after']).toBeUndefined()
        seen.push(exact(policyItem('default', 3, 60)).exec(res.headers['ratelimit-policy'] as string)![1]!)
        seen.push(exact(limitItem('default', r, t)).exec(res.headers.ratelimit as string)![1]!)
      }
      const refused = await get(app, '/hello')
      expect(refused.status).toBe(429)
      expect(refused.headers['ratelimit-policy']).toMatch(exact(policyItem('default', 3, 60)))
      expect(refused.headers.ratelimit).toMatch(exact(limitItem('default', 0, 20)))
      expect(refused.headers['retry-after']).toBe('20')
      expect(refused.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(refused.json()).toEqual({
        type: QUOTA_EXCEEDED,
        title: expect.any(String),
        status: 429,
        'violated-policies': ['default'],
      })
      expect(app.calls('/hello')).toBe(3)
      // One partition key for this client, on both fields, every time; it never spells the address.
      expect(new Set(seen).size).toBe(1)
      expect(seen[0]).not.toContain('127')
    })

    it('pk is the documented hash of the key, never the key', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        routes: [{ method: 'GET', path: '/hello' }],
        app: { limiter: api, key: () => 'k1' },
      })
      const res = await get(app, '/hello')
      const pk = /pk=:([^:]+):/.exec(res.headers.ratelimit as string)![1]
      // The key as given, or the Redis key built from it: both are hashes, neither is the key.
      expect([partitionKey('k1'), partitionKey(api.keysFor('k1')[0]!)]).toContain(pk)
    })

    it('the default algorithm (sliding-window): N x 200 then 429, Retry-After equals t', async () => {
      const api = limiter({ limit: 4, window: '30s' })
      const app = await start({ routes: [{ method: 'GET', path: '/hello' }], app: { limiter: api } })
      expect(await statuses(app, 4, '/hello')).toEqual([200, 200, 200, 200])
      const refused = await get(app, '/hello')
      expect(refused.status).toBe(429)
      const t = Number(/;t=(\d+);/.exec(refused.headers.ratelimit as string)![1])
      expect(refused.headers.ratelimit).toMatch(exact(limitItem('default', 0, t)))
      expect(Number(refused.headers['retry-after'])).toBe(t)
      expect(t).toBeGreaterThanOrEqual(1)
      // 4 spent in this window: the rest of it, then a quarter of the next, where ceil(4 x (W - t) / W)
      // drops to 3 (30 s + 7.5 s at most).
      expect(t).toBeLessThanOrEqual(38)
      expect(app.calls('/hello')).toBe(4)
    })

    it.each(['sliding-window', 'fixed-window'] as const)(
      'Retry-After is honest (%s, 1s window): wait it, retry, 200',
      async (algorithm) => {
        // Windows are aligned to the epoch: start just after a boundary so the burst stays in one window.
        // A burst a loaded machine stretched past the window's end proves nothing: again, on a new limiter.
        let app: Awaited<ReturnType<typeof start>>
        let burst: number[]
        let refused: Awaited<ReturnType<typeof get>>
        for (let attempt = 1; ; attempt++) {
          const api = limiter({ limit: 2, window: 1000, algorithm })
          app = await start({ routes: [{ method: 'GET', path: '/hello' }], app: { limiter: api } })
          await sleepAtLeast(1000 - (Date.now() % 1000) + 20)
          const window = Math.floor(Date.now() / 1000)
          burst = await statuses(app, 2, '/hello')
          refused = await get(app, '/hello')
          if (Math.floor(Date.now() / 1000) === window || attempt === 5) break
        }
        expect(burst).toEqual([200, 200])
        expect(refused.status).toBe(429)
        const seconds = Number(refused.headers['retry-after'])
        expect(Number.isInteger(seconds) && seconds >= 1).toBe(true)
        await sleepAtLeast(seconds * 1000)
        expect((await get(app, '/hello')).status).toBe(200)
      },
    )

    it('multi-policy: one item per policy, in order; violated-policies names the refusing one', async () => {
      const api = limiter({
        policies: {
          burst: { limit: 2, window: '10s', algorithm: 'gcra' },
          daily: { limit: 5, window: '1h', algorithm: 'gcra' },
        },
      })
      const app = await start({ routes: [{ method: 'GET', path: '/hello' }], app: { limiter: api } })
      const policy = exact(`${policyItem('burst', 2, 10)}, ${policyItem('daily', 5, 3600)}`)
      const first = await get(app, '/hello')
      expect(first.headers['ratelimit-policy']).toMatch(policy)
      expect(first.headers.ratelimit).toMatch(
        exact(`${limitItem('burst', 1, 5)}, ${limitItem('daily', 4, 720)}`),
      )
      const second = await get(app, '/hello')
      expect(second.headers.ratelimit).toMatch(
        exact(`${limitItem('burst', 0, 10)}, ${limitItem('daily', 3, 1440)}`),
      )
      const refused = await get(app, '/hello')
      expect(refused.status).toBe(429)
      expect(refused.headers['ratelimit-policy']).toMatch(policy)
      expect(refused.headers.ratelimit).toMatch(
        exact(`${limitItem('burst', 0, 5)}, ${limitItem('daily', 3, 1440)}`),
      )
      expect(refused.headers['retry-after']).toBe('5')
      expect(refused.json()['violated-policies']).toEqual(['burst'])
    })

    it("headers: 'draft-7'", async () => {
      const api = limiter({ limit: 3, window: '60s', algorithm: 'gcra' })
      const app = await start({
        routes: [{ method: 'GET', path: '/hello' }],
        app: { limiter: api, headers: 'draft-7' },
      })
      const res = await get(app, '/hello')
      expect(res.headers['ratelimit-policy']).toBe('3;w=60')
      expect(res.headers.ratelimit).toBe('limit=3, remaining=2, reset=20')
      expect(res.headers['ratelimit-limit']).toBeUndefined()
      expect(res.headers['x-ratelimit-limit']).toBeUndefined()
    })

    it("headers: 'draft-6'", async () => {
      const api = limiter({ limit: 3, window: '60s', algorithm: 'gcra' })
      const app = await start({
        routes: [{ method: 'GET', path: '/hello' }],
        app: { limiter: api, headers: 'draft-6' },
      })
      const res = await get(app, '/hello')
      expect(res.headers['ratelimit-policy']).toBe('3;w=60')
      expect(res.headers['ratelimit-limit']).toBe('3')
      expect(res.headers['ratelimit-remaining']).toBe('2')
      expect(res.headers['ratelimit-reset']).toBe('20')
      expect(res.headers.ratelimit).toBeUndefined()
    })

    it('headers: false sends no RateLimit fields, but 429 keeps Retry-After', async () => {
      const api = limiter({ limit: 1, window: '60s', algorithm: 'gcra' })
      const app = await start({
        routes: [{ method: 'GET', path: '/hello' }],
        app: { limiter: api, headers: false },
      })
      const ok = await get(app, '/hello')
      expect(ok.status).toBe(200)
      expect(rateLimitFields(ok)).toEqual([])
      const refused = await get(app, '/hello')
      expect(refused.status).toBe(429)
      expect(rateLimitFields(refused)).toEqual([])
      expect(refused.headers['retry-after']).toBe('60')
    })

    it('legacyHeaders: X-RateLimit-Limit / -Remaining / -Reset (epoch seconds), alongside ietf', async () => {
      const api = limiter({ limit: 3, window: '60s', algorithm: 'gcra' })
      const app = await start({
        routes: [{ method: 'GET', path: '/hello' }],
        app: { limiter: api, legacyHeaders: true },
      })
      const before = Math.floor(Date.now() / 1000)
      const res = await get(app, '/hello')
      expect(res.headers['x-ratelimit-limit']).toBe('3')
      expect(res.headers['x-ratelimit-remaining']).toBe('2')
      const reset = Number(res.headers['x-ratelimit-reset'])
      expect(reset).toBeGreaterThanOrEqual(before + 19)
      expect(reset).toBeLessThanOrEqual(before + 22)
      expect(res.headers.ratelimit).toMatch(exact(limitItem('default', 2, 20)))
    })
  })
}
