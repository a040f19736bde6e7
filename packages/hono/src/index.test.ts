/**
 * Adapter-specific behaviour of `@tollgate/hono`, driven in-process with `app.request()` against the
 * suite's real Redis (see test/helpers.ts for the fake `getConnInfo`): admission, refusal, onLimited;
 * the real `@hono/node-server` `getConnInfo` (also exercised in the shared HTTP suite); and which requests
 * share a budget: the middleware's scope and the route templates Hono matched.
 */
import { serve } from '@hono/node-server'
import { getConnInfo as nodeConnInfo } from '@hono/node-server/conninfo'
import { ConfigError, type Decision, RedisStore } from '@tollgate/core'
import { QUOTA_EXCEEDED_TYPE } from '@tollgate/http'
import { at, redisUrl } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { type Context, Hono } from 'hono'
import { HTTPException } from 'hono/http-exception'
import { createClient } from 'redis'
import { fakeConnInfo, from, honoTestbed, identity, statuses } from '../test/helpers'
import { type RateLimitEnv, rateLimiter } from './index'

const { limiter, redis } = honoTestbed()

describe('rateLimiter on app.request()', () => {
  it('admits the limit, then answers 429 problem+json with RateLimit headers and does not run the handler', async () => {
    const app = new Hono()
    let ran = 0
    app.use('*', rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo }))
    app.get('/', (c) => {
      ran++
      return c.text('ok')
    })
    const first = await app.request('/', from('1.2.3.4'))
    expect(first.status).toBe(200)
    expect(first.headers.get('ratelimit-policy')).toMatch(/^"default";q=2;w=60;pk=:[A-Za-z0-9+/]{16}:$/)
    expect(first.headers.get('ratelimit')).toMatch(/^"default";r=1;t=\d+;pk=:/)
    expect((await app.request('/', from('1.2.3.4'))).status).toBe(200)
    const refused = await app.request('/', from('1.2.3.4'))
    expect(refused.status).toBe(429)
    expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
    expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(await refused.json()).toEqual({
      type: QUOTA_EXCEEDED_TYPE,
      title: expect.any(String),
      status: 429,
      'violated-policies': ['default'],
    })
    expect(ran).toBe(2)
    // Another address has its own budget.
    expect((await app.request('/', from('1.2.3.5'))).status).toBe(200)
  })

  it("exposes the decision as c.get('rateLimit'), typed", async () => {
    const app = new Hono<RateLimitEnv>()
    app.use(rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo }))
    app.get('/', (c) => {
      const d: Decision | undefined = c.get('rateLimit')
      return c.json({ remaining: d?.remaining, limit: d?.limit })
    })
    // Also typed without the Env, through ContextVariableMap.
    const plain = new Hono()
    plain.use(rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo }))
    plain.get('/', (c) => c.json({ allowed: c.get('rateLimit')?.allowed ?? null }))
    await app.request('/', from('2.0.0.1'))
    expect(await (await app.request('/', from('2.0.0.1'))).json()).toEqual({ remaining: 3, limit: 5 })
    expect(await (await plain.request('/', from('2.0.0.1'))).json()).toEqual({ allowed: true })
  })

  it('sets the headers on a bare Response from the handler too', async () => {
    const app = new Hono()
    app.use(rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo, legacyHeaders: true }))
    app.get('/', () => new Response('raw', { headers: { 'x-own': '1' } }))
    const res = await app.request('/', from('2.0.0.2'))
    expect(res.status).toBe(200)
    expect(res.headers.get('x-own')).toBe('1')
    expect(res.headers.get('ratelimit')).toMatch(/^"default";r=4;/)
    expect(res.headers.get('x-ratelimit-remaining')).toBe('4')
  })

  describe('onLimited', () => {
    it('builds the 429 with the context, which already carries the RateLimit headers', async () => {
      const seen: Decision[] = []
      const app = new Hono()
      app.use(
        rateLimiter({
          limiter: limiter(1),
          getConnInfo: fakeConnInfo,
          onLimited: (c, decision) => {
            seen.push(decision)
            return c.json({ error: 'slow down', retryInMs: decision.retryAfterMs }, 429)
          },
        }),
      )
      app.get('/', (c) => c.text('ok'))
      await app.request('/', from('3.0.0.1'))
      const res = await app.request('/', from('3.0.0.1'))
      expect(res.status).toBe(429)
      expect(res.headers.get('content-type')).toMatch(/^application\/json/)
      expect(res.headers.get('ratelimit')).toMatch(/^"default";r=0;/)
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/)
      expect((await res.json()).error).toBe('slow down')
      expect(seen).toHaveLength(1)
      expect(at(seen, 0).allowed).toBe(false)
    })

    it('adds the headers to a bare Response it returns', async () => {
      const app = new Hono()
      app.use(
        rateLimiter({
          limiter: limiter(1),
          getConnInfo: fakeConnInfo,
          onLimited: () => new Response('nope', { status: 429 }),
        }),
      )
      app.get('/', (c) => c.text('ok'))
      await app.request('/', from('3.0.0.2'))
      const res = await app.request('/', from('3.0.0.2'))
      expect(res.status).toBe(429)
      expect(await res.text()).toBe('nope')
      expect(res.headers.get('ratelimit')).toMatch(/^"default";r=0;/)
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/)
    })

    it('can throw an HTTPException to go through app.onError', async () => {
      const app = new Hono()
      app.use(
        rateLimiter({
          limiter: limiter(1),
          getConnInfo: fakeConnInfo,
          onLimited: (c) => {
            throw new HTTPException(429, { message: `limited ${c.get('rateLimit')?.limit}` })
          },
        }),
      )
      app.get('/', (c) => c.text('ok'))
      app.onError((err, c) =>
        c.text(`onError: ${err.message}`, err instanceof HTTPException ? err.status : 500),
      )
      await app.request('/', from('3.0.0.3'))
      const res = await app.request('/', from('3.0.0.3'))
      expect(res.status).toBe(429)
      expect(await res.text()).toBe('onError: limited 1')
    })
  })
})

describe('rateLimiter on @hono/node-server', () => {
  it("keys on the socket address from @hono/node-server's getConnInfo", async () => {
    const app = new Hono()
    app.use(rateLimiter({ limiter: limiter(2), getConnInfo: nodeConnInfo }))
    app.get('/', (c) => c.text(identity(c) ?? ''))
    const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s))
    })
    try {
      const address = server.address()
      const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/`
      const spoof = { headers: { 'x-forwarded-for': '1.2.3.4' } }
      const a = await fetch(url, spoof)
      expect(await a.text()).toBe('127.0.0.1')
      expect((await fetch(url, spoof)).status).toBe(200)
      const c = await fetch(url, spoof)
      expect(c.status).toBe(429)
      expect(c.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})

describe('two middlewares with inline options, default prefix, different policies', () => {
  it('on one store: ConfigError at construction, naming both', () => {
    const one = new RedisStore(redis())
    rateLimiter({ store: one, limit: 100, window: '1m', getConnInfo: fakeConnInfo })
    expect(() => rateLimiter({ store: one, limit: 3, window: '1h', getConnInfo: fakeConnInfo })).toThrow(
      ConfigError,
    )
    expect(() => rateLimiter({ store: one, limit: 3, window: '1h', getConnInfo: fakeConnInfo })).toThrow(
      /"tollgate" \(sliding-window 3\/1h\).*"tollgate" \(sliding-window 100\/1m\)/,
    )
  })

  it('on two clients (two processes, one Redis): the stricter admits 3 of 8', async () => {
    // a fresh identity: the default prefix is shared with every other test on this Redis
    const id = uniquePrefix('hono-two')
    // (two stores over one client are one store: the other process has a client of its own)
    const other = await createClient({ url: redisUrl() })
      .on('error', () => {})
      .connect()
    try {
      const app = new Hono()
      app.use(rateLimiter({ store: new RedisStore(redis()), limit: 100, window: '1m', key: () => id }))
      app.use(rateLimiter({ store: new RedisStore(other), limit: 3, window: '1h', key: () => id }))
      app.get('/', (c) => c.text('ok'))
      expect(await statuses(app, '/', 8, from('10.0.0.1'))).toEqual([200, 200, 200, 429, 429, 429, 429, 429])
    } finally {
      await other.quit()
    }
  })
})

describe('rateLimiter on app.request()', () => {
  describe('scope and route templates', () => {
    const handler = (c: Context) => c.text(c.req.path)

    it("app.use('/api/*') is app-wide by default: every route under it shares the address's budget", async () => {
      const app = new Hono()
      app.use('/api/*', rateLimiter({ limiter: limiter(3), getConnInfo: fakeConnInfo }))
      app.get('/api/a', handler)
      app.get('/api/b/:id', handler)
      app.post('/api/c', handler)
      const out = [
        (await app.request('/api/a', from('7.0.0.1'))).status,
        (await app.request('/api/b/1', from('7.0.0.1'))).status,
        (await app.request('/api/c', from('7.0.0.1', { method: 'POST' }))).status,
        (await app.request('/api/b/2', from('7.0.0.1'))).status,
      ]
      expect(out).toEqual([200, 200, 200, 429])
    })

    it('on a method route, keys on the route template: params and methods share, routes do not', async () => {
      const app = new Hono()
      const mw = rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo })
      app.get('/users/:id', mw, handler)
      app.post('/users/:id', mw, handler)
      app.get('/posts/:id', mw, handler)
      const ip = '7.0.0.2'
      expect([
        (await app.request('/users/1', from(ip))).status,
        (await app.request('/users/2', from(ip))).status,
        (await app.request('/users/3?x=1', from(ip))).status,
        (await app.request('/users/4', from(ip, { method: 'HEAD' }))).status, // HEAD is GET's budget
      ]).toEqual([200, 200, 429, 429])
      // POST /users/:id is the same route template: the method never gives a budget of its own.
      expect((await app.request('/users/1', from(ip, { method: 'POST' }))).status).toBe(429)
      expect((await app.request('/posts/1', from(ip))).status).toBe(200)
    })

    it('the route template includes the base path of a mounted sub-app', async () => {
      const keys: (string | undefined)[] = []
      const sub = new Hono()
      const mw = rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo })
      sub.get('/items/:id', mw, (c) => {
        keys.push(identity(c))
        return c.text('ok')
      })
      const app = new Hono().route('/v1', sub)
      await app.request('/v1/items/42', from('7.0.0.3'))
      expect(keys).toEqual(['7.0.0.3 /v1/items/:id'])
    })

    it("scope: 'route' under app.use gives each handler's template its own budget", async () => {
      const app = new Hono()
      app.use('/api/*', rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo, scope: 'route' }))
      app.get('/api/users/:id', (c) => c.text(identity(c) ?? ''))
      app.get('/api/posts/:id', handler)
      const ip = '7.0.0.4'
      const first = await app.request('/api/users/1', from(ip))
      expect(await first.text()).toBe('7.0.0.4 /api/users/:id')
      expect((await app.request('/api/users/2', from(ip))).status).toBe(200)
      expect((await app.request('/api/users/3', from(ip))).status).toBe(429)
      expect((await app.request('/api/posts/1', from(ip))).status).toBe(200)
      // No handler matched: the mount pattern is the budget (404 scans are limited together).
      expect(await statuses(app, '/api/nothing', 3, from(ip))).toEqual([404, 404, 429])
    })

    it("scope: 'app' on a method route shares one budget across routes", async () => {
      const app = new Hono()
      const mw = rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo, scope: 'app' })
      app.get('/a', mw, handler)
      app.get('/b', mw, handler)
      const ip = '7.0.0.5'
      expect([
        (await app.request('/a', from(ip))).status,
        (await app.request('/b', from(ip))).status,
        (await app.request('/a', from(ip))).status,
      ]).toEqual([200, 200, 429])
    })

    it('app.all counts as app-wide unless scope says otherwise', async () => {
      const keys: (string | undefined)[] = []
      const app = new Hono()
      app.all('/x/:id', rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo }), (c) => {
        keys.push(identity(c))
        return c.text('ok')
      })
      app.all(
        '/y/:id',
        rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo, scope: 'route' }),
        (c) => {
          keys.push(identity(c))
          return c.text('ok')
        },
      )
      await app.request('/x/1', from('7.0.0.6'))
      await app.request('/y/1', from('7.0.0.6', { method: 'DELETE' }))
      expect(keys).toEqual(['7.0.0.6', '7.0.0.6 /y/:id'])
    })
  })
})
