/**
 * The options every adapter shares, through Hono, and the configuration errors thrown at construction.
 */
import { ConfigError, RateLimiter, RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { Hono } from 'hono'
import { createClient } from 'redis'
import { fakeConnInfo, from, honoTestbed, statuses } from '../test/helpers'
import { rateLimiter } from './index'

const { limiter, store } = honoTestbed()

describe('rateLimiter on app.request()', () => {
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
        rateLimiter({
          store: store(),
          prefix: uniquePrefix('inline'),
          limit: 1,
          window: '1m',
          key: () => 'everyone',
        }),
      )
      app.get('/', (c) => c.text('ok'))
      expect(await statuses(app, '/', 2, {})).toEqual([200, 429])
    })
  })
})
