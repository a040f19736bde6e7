/**
 * Adapter-specific behaviour of `@tollgate/hono`, driven in-process with `app.request()` against the
 * suite's real Redis. `app.request()` has no socket, so `getConnInfo` is a fake that reads the address the
 * test chose from a test-only header (the real `@hono/node-server` one is exercised at the end and in the
 * shared HTTP suite).
 */
import { serve } from '@hono/node-server'
import { getConnInfo as nodeConnInfo } from '@hono/node-server/conninfo'
import { ConfigError, type Decision, RateLimiter, RedisStore } from '@tollgate/core'
import { QUOTA_EXCEEDED_TYPE } from '@tollgate/core/http'
import { redisUrl } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { type Context, Hono } from 'hono'
import { HTTPException } from 'hono/http-exception'
import { createClient } from 'redis'
import { clientAddress, type GetClientAddress, type RateLimitEnv, rateLimiter } from '../src'

type Client = ReturnType<typeof createClient>
let redis: Client
let store: RedisStore

beforeAll(async () => {
  redis = createClient({ url: redisUrl() })
  redis.on('error', () => {})
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis.quit()
})

const TEST_IP = 'x-test-socket'
/** The "socket address" is whatever the test puts in a test-only header. */
const fakeConnInfo: GetClientAddress = (c) => ({ remote: { address: c.req.header(TEST_IP) } })
const limiter = (limit = 3, extra: object = {}) =>
  new RateLimiter({ store, prefix: uniquePrefix('hono'), limit, window: '1m', ...extra })
const from = (ip: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { [TEST_IP]: ip, ...(init.headers as Record<string, string> | undefined) },
})
/** The identity the first policy of the decision was applied to (the key the middleware built). */
const identity = (c: Context): string | undefined => c.get('rateLimit')?.policies[0].key
const statuses = async (app: Hono<any>, path: string, n: number, init: RequestInit): Promise<number[]> => {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await app.request(path, init)).status)
  return out
}

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
      expect(seen[0].allowed).toBe(false)
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

  describe('client address', () => {
    it('ignores X-Forwarded-For by default: a spoofing client still shares its socket budget', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(3), getConnInfo: fakeConnInfo }))
      app.get('/', (c) => c.text('ok'))
      const out: number[] = []
      for (let i = 0; i < 5; i++) {
        out.push(
          (await app.request('/', from('4.0.0.1', { headers: { 'x-forwarded-for': `9.9.9.${i}` } }))).status,
        )
      }
      expect(out).toEqual([200, 200, 200, 429, 429])
    })

    it('with trustProxy: 1, keys on the rightmost X-Forwarded-For entry', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo, trustProxy: 1 }))
      app.get('/', (c) => c.text('ok'))
      // The proxy (socket 10.0.0.1) appends the real client; whatever the client sent before is ignored.
      const via = (spoofed: string) =>
        from('10.0.0.1', { headers: { 'x-forwarded-for': `${spoofed}, 5.0.0.1` } })
      expect([
        (await app.request('/', via('7.7.7.1'))).status,
        (await app.request('/', via('7.7.7.2'))).status,
        (await app.request('/', via('7.7.7.3'))).status,
      ]).toEqual([200, 200, 429])
      // Another client behind the same proxy has its own budget.
      const other = from('10.0.0.1', { headers: { 'x-forwarded-for': '5.0.0.2' } })
      expect((await app.request('/', other)).status).toBe(200)
    })

    it('with trustProxy: 2, keys on the second entry from the right (or the leftmost if fewer)', async () => {
      let seen: string | undefined
      const app = new Hono()
      app.get('/', (c) => {
        seen = clientAddress(c, fakeConnInfo, 2)
        return c.text('ok')
      })
      const ask = async (xff?: string) => {
        await app.request(
          '/',
          from('10.0.0.2', xff === undefined ? {} : { headers: { 'x-forwarded-for': xff } }),
        )
        return seen
      }
      expect(await ask('1.1.1.1, 2.2.2.2, 3.3.3.3')).toBe('2.2.2.2')
      expect(await ask('2.2.2.2 ,3.3.3.3')).toBe('2.2.2.2')
      expect(await ask('3.3.3.3')).toBe('3.3.3.3')
      expect(await ask()).toBe('10.0.0.2')
      expect(await ask('')).toBe('10.0.0.2')
    })

    it('canonicalises addresses: IPv4-mapped spellings and one IPv6 /56 share a budget', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(3), getConnInfo: fakeConnInfo }))
      app.get('/', (c) => c.text('ok'))
      const v4 = ['6.0.0.1', '::ffff:6.0.0.1', '::FFFF:0600:0001', '[::ffff:6.0.0.1]:443']
      const res4 = []
      for (const ip of v4) res4.push((await app.request('/', from(ip))).status)
      expect(res4).toEqual([200, 200, 200, 429])
      const v6 = ['2001:db8:0:aa01::1', '2001:db8:0:aa02::1', '2001:db8:0:aaff::1', '2001:db8:0:aa10::1']
      const res6 = []
      for (const ip of v6) res6.push((await app.request('/', from(ip))).status)
      expect(res6).toEqual([200, 200, 200, 429])
      expect((await app.request('/', from('2001:db8:0:ab00::1'))).status).toBe(200)
    })

    it('accepts a getConnInfo that returns the address as text', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(1), getConnInfo: (c) => c.req.header(TEST_IP) }))
      app.get('/', (c) => c.text('ok'))
      expect(await statuses(app, '/', 2, from('6.1.0.1'))).toEqual([200, 429])
    })

    it('answers 400 (never a shared bucket) when the address is missing or unreadable', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo }))
      app.get('/', (c) => c.text('ok'))
      const missing = await app.request('/')
      expect(missing.status).toBe(400)
      expect(missing.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
      expect((await missing.json()).status).toBe(400)
      expect((await app.request('/', from('not-an-ip'))).status).toBe(400)
    })
  })

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

  describe('common options', () => {
    it('key, cost and skip receive the Hono context', async () => {
      const app = new Hono()
      app.use(
        rateLimiter({
          limiter: limiter(10),
          key: (c) => `user:${c.req.header('x-user')}`,
          cost: (c) => (c.req.method === 'POST' ? 4 : 1),
          skip: (c) => c.req.header('x-internal') === 'yes',
        }),
      )
      app.all('/', (c) => c.text(String(c.get('rateLimit')?.remaining ?? 'skipped')))
      const as = (user: string, init: RequestInit = {}) => ({
        ...init,
        headers: { 'x-user': user, ...(init.headers as Record<string, string> | undefined) },
      })
      expect(await (await app.request('/', as('u1', { method: 'POST' }))).text()).toBe('6')
      expect(await (await app.request('/', as('u1', { method: 'POST' }))).text()).toBe('2')
      expect((await app.request('/', as('u1', { method: 'POST' }))).status).toBe(429)
      expect(await (await app.request('/', as('u1'))).text()).toBe('1')
      const skipped = await app.request('/', as('u1', { headers: { 'x-internal': 'yes' } }))
      expect(await skipped.text()).toBe('skipped')
      expect(skipped.headers.get('ratelimit')).toBeNull()
      expect(await (await app.request('/', as('u2'))).text()).toBe('9')
    })

    it('picks the limiter per request (tiers)', async () => {
      const free = limiter(1)
      const pro = limiter(3)
      const app = new Hono()
      app.use(
        rateLimiter({
          limiter: (c) => (c.req.header('x-plan') === 'pro' ? pro : free),
          getConnInfo: fakeConnInfo,
        }),
      )
      app.get('/', (c) => c.text('ok'))
      expect(await statuses(app, '/', 2, from('8.0.0.1'))).toEqual([200, 429])
      expect(await statuses(app, '/', 4, from('8.0.0.1', { headers: { 'x-plan': 'pro' } }))).toEqual([
        200, 200, 200, 429,
      ])
    })

    it('skipFailedRequests refunds once the handler answered >= 400', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo, skipFailedRequests: true }))
      app.get('/fail', (c) => c.text('no', 500))
      app.get('/throw', () => {
        throw new Error('boom')
      })
      app.get('/ok', (c) => c.text('ok'))
      const ip = '8.0.0.2'
      expect(await statuses(app, '/fail', 4, from(ip))).toEqual([500, 500, 500, 500])
      expect(await statuses(app, '/throw', 4, from(ip))).toEqual([500, 500, 500, 500])
      await new Promise((r) => setTimeout(r, 50)) // refunds are fire-and-forget
      expect(await statuses(app, '/ok', 3, from(ip))).toEqual([200, 200, 429])
    })

    it('shadow mode decides and sends headers but never refuses', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(1), getConnInfo: fakeConnInfo, shadow: true }))
      app.get('/', (c) => c.text(JSON.stringify(c.get('rateLimit')?.shadow)))
      await app.request('/', from('8.0.0.3'))
      const res = await app.request('/', from('8.0.0.3'))
      expect(res.status).toBe(200)
      // The limiter's shadow mode: allowed, with the policies that would have refused.
      expect(await res.text()).toBe('["default"]')
      expect(res.headers.get('ratelimit')).toMatch(/^"default";r=0;/)
    })

    it("answers 503 with Retry-After when the store is down under onStoreError: 'deny'", async () => {
      const dead = createClient({ url: redisUrl() })
      dead.on('error', () => {})
      await dead.connect()
      await dead.quit()
      const down = new RateLimiter({
        store: new RedisStore(dead),
        prefix: uniquePrefix('down'),
        limit: 5,
        window: '1m',
      })
      const app = new Hono()
      let ran = false
      app.use(rateLimiter({ limiter: down, getConnInfo: fakeConnInfo, onStoreError: 'deny' }))
      app.get('/', (c) => {
        ran = true
        return c.text('ok')
      })
      const res = await app.request('/', from('8.0.0.4'))
      expect(res.status).toBe(503)
      expect(res.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/)
      expect((await res.json()).type).toBe(
        'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
      )
      expect(ran).toBe(false)
    })
  })

  describe('configuration errors, thrown at construction', () => {
    const api = () => limiter(5)
    const bad: [string, () => unknown, string][] = [
      ['neither getConnInfo nor key', () => rateLimiter({ limiter: api() }), 'getConnInfo'],
      [
        'getConnInfo not a function',
        () => rateLimiter({ limiter: api(), getConnInfo: 'x' as never }),
        'getConnInfo',
      ],
      [
        'trustProxy: true',
        () => rateLimiter({ limiter: api(), getConnInfo: fakeConnInfo, trustProxy: true as never }),
        'trustProxy',
      ],
      [
        'trustProxy: -1',
        () => rateLimiter({ limiter: api(), getConnInfo: fakeConnInfo, trustProxy: -1 }),
        'trustProxy',
      ],
      [
        'trustProxy: 1.5',
        () => rateLimiter({ limiter: api(), getConnInfo: fakeConnInfo, trustProxy: 1.5 }),
        'trustProxy',
      ],
      [
        'trustProxy without getConnInfo',
        () => rateLimiter({ limiter: api(), key: () => 'k', trustProxy: 1 }),
        'trustProxy',
      ],
      [
        'scope: "global"',
        () => rateLimiter({ limiter: api(), getConnInfo: fakeConnInfo, scope: 'global' as never }),
        'scope',
      ],
      [
        'onLimited not a function',
        () => rateLimiter({ limiter: api(), getConnInfo: fakeConnInfo, onLimited: 429 as never }),
        'onLimited',
      ],
      [
        'windowMs (a peer name)',
        () => rateLimiter({ limiter: api(), getConnInfo: fakeConnInfo, windowMs: 1000 } as never),
        'windowMs',
      ],
      ['no limiter', () => rateLimiter({ getConnInfo: fakeConnInfo }), 'limiter'],
      [
        'headers: "draft-8"',
        () => rateLimiter({ limiter: api(), getConnInfo: fakeConnInfo, headers: 'draft-8' as never }),
        'headers',
      ],
    ]
    it.each(bad)('%s', (_name, make, option) => {
      let error: unknown
      try {
        make()
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).option).toBe(option)
      expect((error as ConfigError).code).toBe('ERR_TOLLGATE_CONFIG')
    })

    it('explains the missing client address', () => {
      expect(() => rateLimiter({ limiter: api() })).toThrow(
        /getConnInfo.*@hono\/node-server\/conninfo.*Hono has no portable client address/,
      )
    })

    it('accepts key without getConnInfo, and inline limiter options', async () => {
      const app = new Hono()
      app.use(
        rateLimiter({ store, prefix: uniquePrefix('inline'), limit: 1, window: '1m', key: () => 'everyone' }),
      )
      app.get('/', (c) => c.text('ok'))
      expect(await statuses(app, '/', 2, {})).toEqual([200, 429])
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
    const one = new RedisStore(redis)
    rateLimiter({ store: one, limit: 100, window: '1m', getConnInfo: fakeConnInfo })
    expect(() => rateLimiter({ store: one, limit: 3, window: '1h', getConnInfo: fakeConnInfo })).toThrow(
      ConfigError,
    )
    expect(() => rateLimiter({ store: one, limit: 3, window: '1h', getConnInfo: fakeConnInfo })).toThrow(
      /"tollgate" \(sliding-window 3\/1h\).*"tollgate" \(sliding-window 100\/1m\)/,
    )
  })

  it('on two stores (two processes, one Redis): the stricter admits 3 of 8', async () => {
    // a fresh identity: the default prefix is shared with every other test on this Redis
    const id = uniquePrefix('hono-two')
    const app = new Hono()
    app.use(rateLimiter({ store: new RedisStore(redis), limit: 100, window: '1m', key: () => id }))
    app.use(rateLimiter({ store: new RedisStore(redis), limit: 3, window: '1h', key: () => id }))
    app.get('/', (c) => c.text('ok'))
    expect(await statuses(app, '/', 8, from('10.0.0.1'))).toEqual([200, 200, 200, 429, 429, 429, 429, 429])
  })
})
