/** Which requests share a budget: route templates, methods, groups, app-wide and route-level limiters. */
import http from 'node:http'
import { RateLimiter } from '@tollgate/core'
import type { SuiteContext } from './context'
import { rateLimitFields } from './rate-limit-fields'
import { request } from './request'

export function describeRoutes(s: SuiteContext): void {
  const { limiter, start, get, statuses } = s
  describe('routes', () => {
    it('route templates: path variants of one route share one budget; HEAD counts as GET', async () => {
      const api = limiter({ limit: 3, window: '60s' })
      const app = await start({
        routes: [{ method: 'GET', path: '/users/:id', options: { limiter: api } }],
      })
      // Every framework routes these to /users/:id.
      const required: Array<[string, string]> = [
        ['GET', '/users/1'],
        ['GET', '/users/2'],
        ['GET', '/users/1?x=1'],
        ['HEAD', '/users/1'],
        ['GET', '/users/%31'],
      ]
      // Some frameworks route these to /users/:id too (case-insensitive, trailing slash, `;params`,
      // duplicate slashes); when they do, they must share the budget; when they do not, they 404.
      const optional: Array<[string, string]> = [
        ['GET', '/USERS/1'],
        ['GET', '/users/1/'],
        ['GET', '/Users/1/'],
        ['GET', '/users//1'],
        ['GET', '/users/1;x=1'],
      ]
      const results: Array<{ variant: string; status: number; required: boolean }> = []
      for (let round = 0; round < 2; round++) {
        for (const [list, isRequired] of [
          [required, true],
          [optional, false],
        ] as const) {
          for (const [method, path] of list) {
            const res = await request(app.url, path, { method })
            results.push({ variant: `${method} ${path}`, status: res.status, required: isRequired })
          }
        }
      }
      for (const r of results) {
        if (r.required) expect([r.variant, [200, 429].includes(r.status)]).toEqual([r.variant, true])
        else expect([r.variant, [200, 429, 404].includes(r.status)]).toEqual([r.variant, true])
      }
      if (process.env.HTTP_SUITE_DEBUG) console.log(results)
      const routed = results.filter((r) => r.status !== 404).map((r) => r.status)
      expect(routed.slice(0, 3)).toEqual([200, 200, 200])
      expect(routed.slice(3).every((s) => s === 429)).toBe(true)
      expect(app.calls('/users/:id')).toBe(3)
    })

    it('one limiter on two routes: separate budgets; on two methods of one route: one budget', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        routes: [
          { method: 'GET', path: '/hello', options: { limiter: api } },
          { method: 'GET', path: '/plan', options: { limiter: api } },
          { method: 'POST', path: '/plan', options: { limiter: api } },
        ],
      })
      expect(await statuses(app, 3, '/hello')).toEqual([200, 200, 429])
      expect(await statuses(app, 2, '/plan')).toEqual([200, 200])
      // The method is not part of the default key: POST /plan spends GET /plan's budget.
      expect((await request(app.url, '/plan', { method: 'POST', body: {} })).status).toBe(429)
    })

    // The method is not part of the default key: a client chooses it freely, so a route mounted for
    // every method must not give each method a budget of its own.
    it('a route for every method: rotating the method never multiplies the budget', async () => {
      const api = limiter({ limit: 5, window: '60s' })
      const app = await start({ routes: [{ method: 'ALL', path: '/any', options: { limiter: api } }] })
      const statusOf: number[] = []
      for (const method of http.METHODS.filter((m) => m !== 'CONNECT'))
        statusOf.push((await request(app.url, '/any', { method })).status)
      // Methods a framework does not route (404/405) or refuses before the limiter (Fastify: QUERY
      // without a body, 400) are neither admitted nor refused.
      const admitted = statusOf.filter((s) => s === 200).length
      const refused = statusOf.filter((s) => s === 429).length
      expect(admitted + refused).toBeGreaterThanOrEqual(7)
      expect(admitted).toBe(5)
      expect(app.calls('/any')).toBe(5)
    })

    it('one handler registered for several methods: one budget across them', async () => {
      const api = limiter({ limit: 5, window: '60s' })
      const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']
      const app = await start({ routes: [{ method: methods, path: '/any', options: { limiter: api } }] })
      const seen: number[] = []
      for (let round = 0; round < 2; round++)
        for (const method of methods) seen.push((await request(app.url, '/any', { method })).status)
      expect(seen.slice(0, 5)).toEqual([200, 200, 200, 200, 200])
      expect(seen.slice(5).every((s) => s === 429)).toBe(true)
      expect(app.calls('/any')).toBe(5)
    })

    it('group: routes naming one group share one budget, across limiter instances; others keep theirs', async () => {
      const search = limiter({ limit: 3, window: '1d' })
      // another instance on the same prefix and policy: the same budget (e.g. another module's router)
      const again = new RateLimiter({ store: s.store, prefix: search.prefix, limit: 3, window: '1d' })
      const app = await start({
        routes: [
          { method: 'GET', path: '/hello', options: { limiter: search, group: 'search' } },
          { method: 'GET', path: '/users/:id', options: { limiter: again, group: 'search' } },
          { method: 'GET', path: '/plan', options: { limiter: search } },
          { method: 'POST', path: '/login', options: { limiter: search, group: 'login' } },
        ],
      })
      expect((await get(app, '/hello')).status).toBe(200)
      expect((await get(app, '/users/1')).status).toBe(200)
      expect((await get(app, '/users/2')).status).toBe(200)
      expect((await get(app, '/hello')).status).toBe(429)
      expect((await get(app, '/users/3')).status).toBe(429)
      expect(app.calls('/hello') + app.calls('/users/:id')).toBe(3)
      // a route without the group, and another group, have budgets of their own
      expect(await statuses(app, 3, '/plan')).toEqual([200, 200, 200])
      expect((await request(app.url, '/login', { method: 'POST', body: {} })).status).toBe(200)
      // one key, whatever the route: the group's
      expect((await search.peek('127.0.0.1 group:search')).remaining).toBe(0)
      expect((await search.peek('127.0.0.1 group:login')).remaining).toBe(2)
    })

    it('app-wide limiter keys on the client IP alone: every route shares its budget', async () => {
      const api = limiter({ limit: 3, window: '60s' })
      const app = await start({
        app: { limiter: api },
        routes: [
          { method: 'GET', path: '/hello' },
          { method: 'GET', path: '/users/:id' },
        ],
      })
      expect((await get(app, '/hello')).status).toBe(200)
      expect((await get(app, '/users/1')).status).toBe(200)
      expect((await get(app, '/users/2')).status).toBe(200)
      expect((await get(app, '/hello')).status).toBe(429)
      expect((await get(app, '/users/3')).status).toBe(429)
    })

    it('a route without options and a route with options: false', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        app: { limiter: api },
        routes: [
          { method: 'GET', path: '/hello', options: false },
          { method: 'GET', path: '/plan' },
        ],
      })
      const exempt = await statuses(app, 5, '/hello')
      expect(exempt).toEqual([200, 200, 200, 200, 200])
      expect(rateLimitFields(await get(app, '/hello'))).toEqual([])
      expect(await statuses(app, 3, '/plan')).toEqual([200, 200, 429])
      expect(app.calls('/hello')).toBe(6)
    })

    it('app-wide and route-level limiters both apply', async () => {
      const wide = limiter({ limit: 10, window: '60s' })
      const login = limiter({ limit: 2, window: '60s' })
      const app = await start({
        app: { limiter: wide },
        routes: [
          { method: 'POST', path: '/login', options: { limiter: login } },
          { method: 'GET', path: '/hello' },
        ],
      })
      const posts: number[] = []
      for (let i = 0; i < 3; i++)
        posts.push((await request(app.url, '/login', { method: 'POST', body: {} })).status)
      expect(posts).toEqual([200, 200, 429])
      expect(app.calls('/login')).toBe(2)
      expect((await get(app, '/hello')).status).toBe(200)
    })
  })
}
