/** The request functions: keys, skip, per-request limits and cost, and what a bad answer of theirs gets. */
import { InputError, RateLimiter, RedisStore } from '@tollgate/core'
import { fail, freshPrefix, type SuiteContext } from './context'
import { rateLimitFields } from './rate-limit-fields'
import { request } from './request'
import type { SuiteRequest } from './types'

export function describeKeySkipCost(s: SuiteContext): void {
  const { limiter, start, get, statuses } = s
  describe('key, skip, cost', () => {
    it('a custom string key (one budget across client IPs)', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        trustProxy: 1,
        app: { limiter: api, key: (req) => `user:${req.header('x-user')}` },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const a = { 'x-user': 'alice' }
      expect((await get(app, '/hello', { ...a, 'x-forwarded-for': '1.1.1.1' })).status).toBe(200)
      expect((await get(app, '/hello', { ...a, 'x-forwarded-for': '2.2.2.2' })).status).toBe(200)
      expect((await get(app, '/hello', { ...a, 'x-forwarded-for': '3.3.3.3' })).status).toBe(429)
      expect((await get(app, '/hello', { 'x-user': 'bob' })).status).toBe(200)
    })

    it('a multi-policy record key from the JSON body and the client IP (route-level)', async () => {
      const login = limiter({
        policies: { ip: { limit: 3, window: '60s' }, account: { limit: 2, window: '60s' } },
      })
      const app = await start({
        routes: [
          {
            method: 'POST',
            path: '/login',
            options: {
              limiter: login,
              key: (req) => ({ ip: `ip:${req.ip}`, account: `email:${req.body?.email}` }),
            },
          },
        ],
      })
      const post = (email: string) => request(app.url, '/login', { method: 'POST', body: { email } })
      expect((await post('a@x.test')).status).toBe(200)
      expect((await post('a@x.test')).status).toBe(200)
      const perAccount = await post('a@x.test')
      expect(perAccount.status).toBe(429)
      expect(perAccount.json()['violated-policies']).toEqual(['account'])
      expect((await post('b@x.test')).status).toBe(200)
      const perIp = await post('c@x.test')
      expect(perIp.status).toBe(429)
      expect(perIp.json()['violated-policies']).toEqual(['ip'])
      expect(perIp.headers.ratelimit).toMatch(/^"ip";r=0;t=\d+;pk=:[^:]+:, "account";r=2;t=\d+;pk=:[^:]+:$/)
    })

    it("a key function returning '' is a 400, never a 200", async () => {
      const api = limiter({ limit: 5, window: '60s' })
      const app = await start({
        app: { limiter: api, key: () => '' },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const res = await get(app, '/hello')
      expect(res.status).toBe(400)
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(app.calls('/hello')).toBe(0)
    })

    it('a record key missing a policy is a 400', async () => {
      const api = limiter({
        policies: { ip: { limit: 3, window: '60s' }, account: { limit: 2, window: '60s' } },
      })
      const app = await start({
        app: { limiter: api, key: () => ({ ip: 'x' }) },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      expect((await get(app, '/hello')).status).toBe(400)
      expect(app.calls('/hello')).toBe(0)
    })

    it('skip: skipped requests are not limited, not counted, and get no headers', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        app: { limiter: api, skip: (req) => req.header('x-internal') === 'yes' },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      for (let i = 0; i < 4; i++) {
        const res = await get(app, '/hello', { 'x-internal': 'yes' })
        expect(res.status).toBe(200)
        expect(rateLimitFields(res)).toEqual([])
      }
      expect(await statuses(app, 3, '/hello')).toEqual([200, 200, 429])
    })

    it('limits: per-request limits from the request, in one limiter; a bad value is a 400, never a pass', async () => {
      const api = limiter({ limit: 100, window: '1d' })
      const plan = (req: SuiteRequest) => {
        const v = req.header('x-plan')
        return v === 'async' ? Promise.resolve(2) : v === 'none' ? (undefined as never) : Number(v)
      }
      const app = await start({
        routes: [
          { method: 'GET', path: '/plan', options: { limiter: api, limits: plan, key: () => 'tenant' } },
        ],
      })
      const free = { 'x-plan': '2' }
      const first = await get(app, '/plan', free)
      expect(first.status).toBe(200)
      expect(first.headers['ratelimit-policy']).toMatch(/^"default";q=2;w=86400/)
      expect(await statuses(app, 2, '/plan', free)).toEqual([200, 429])
      // another plan's limit for the same key: the key's state, under that limit
      expect((await get(app, '/plan', { 'x-plan': '4' })).status).toBe(200)
      expect((await get(app, '/plan', { 'x-plan': 'async' })).status).toBe(429)
      for (const value of ['0', '-1', '1.5', 'abc', 'none']) {
        const r = await get(app, '/plan', { 'x-plan': value })
        expect([value, r.status]).toEqual([value, 400])
        expect(r.json().detail).toMatch(/limits/)
      }
      expect(app.calls('/plan')).toBe(3)
    })

    it('cost: a number', async () => {
      const api = limiter({ limit: 5, window: '1d', algorithm: 'fixed-window' })
      const app = await start({
        app: { limiter: api, cost: 2 },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const first = await get(app, '/hello')
      expect(first.headers.ratelimit).toMatch(/"default";r=3;/)
      expect((await get(app, '/hello')).headers.ratelimit).toMatch(/"default";r=1;/)
      expect((await get(app, '/hello')).status).toBe(429)
    })

    it('cost: a function of the request; an invalid cost is a 400', async () => {
      const api = limiter({ limit: 5, window: '1d', algorithm: 'fixed-window' })
      const app = await start({
        app: { limiter: api, cost: (req) => Number(req.header('x-cost') ?? '1') },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      expect((await get(app, '/hello', { 'x-cost': '3' })).status).toBe(200)
      expect((await get(app, '/hello', { 'x-cost': '3' })).status).toBe(429)
      const last = await get(app, '/hello', { 'x-cost': '2' })
      expect(last.status).toBe(200)
      expect(last.headers.ratelimit).toMatch(/"default";r=0;/)
      for (const bad of ['abc', '-1', '1.5']) {
        expect([bad, (await get(app, '/hello', { 'x-cost': bad })).status]).toEqual([bad, 400])
      }
      expect(app.calls('/hello')).toBe(2)
    })

    it('a bad answer of a cost or key function is a 400: never the default cost of 1, never an admission', async () => {
      const api = limiter({ limit: 5, window: '1d' })
      // What a function may answer by mistake: nothing, a value of the wrong type, late or not.
      const costs: Record<string, () => unknown> = {
        undefined: () => undefined,
        text: () => '2',
        NaN: () => Number.NaN,
        'async undefined': async () => undefined,
      }
      const keys: Record<string, () => unknown> = {
        undefined: () => undefined,
        number: () => 42,
        empty: () => '',
        'async undefined': async () => undefined,
      }
      const from = (answers: Record<string, () => unknown>, good: unknown) => (req: SuiteRequest) => {
        const bad = answers[req.header('x-bad') ?? '']
        return bad === undefined ? good : bad()
      }
      const app = await start({
        routes: [
          {
            method: 'GET',
            path: '/cost',
            options: { limiter: api, cost: from(costs, 1) as never, key: () => 'c' },
          },
          { method: 'GET', path: '/key', options: { limiter: api, key: from(keys, 'k') as never } },
        ],
      })
      for (const [path, answers] of [
        ['/cost', costs],
        ['/key', keys],
      ] as const) {
        for (const bad of Object.keys(answers)) {
          const res = await get(app, path, { 'x-bad': bad })
          expect([path, bad, res.status]).toEqual([path, bad, 400])
          expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
        }
      }
      expect(app.calls('/cost') + app.calls('/key')).toBe(0)
      // nothing was charged: the first good request sees the whole budget but its own unit
      expect((await get(app, '/cost')).headers.ratelimit).toMatch(/"default";r=4;/)
    })

    it("an InputError from the app's own function is a 400 even when the store is down under 'allow'", async () => {
      const api = new RateLimiter({
        store: new RedisStore({ evalsha: fail, eval: fail }),
        prefix: freshPrefix(),
        limit: 5,
        window: '1m',
        onStoreError: 'allow',
      })
      const refuse = () => {
        throw new InputError('x-account', 'an account id', 'nobody')
      }
      const app = await start({
        routes: [
          { method: 'GET', path: '/sync', options: { limiter: api, key: refuse } },
          { method: 'GET', path: '/async', options: { limiter: api, key: async () => refuse() } },
          { method: 'GET', path: '/cost', options: { limiter: api, cost: () => undefined as never } },
          { method: 'GET', path: '/open', options: { limiter: api } },
        ],
      })
      for (const path of ['/sync', '/async', '/cost']) {
        const res = await get(app, path)
        expect([path, res.status]).toEqual([path, 400])
        expect(app.calls(path)).toBe(0)
      }
      // the same limiter does fail open for a good request: the 400s are not the outage's answer
      expect((await get(app, '/open')).status).toBe(200)
    })
  })
}
