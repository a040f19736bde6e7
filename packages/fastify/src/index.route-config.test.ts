/**
 * A route's own `config.rateLimit` (or `false`) and the hook the limiter runs in, on both majors.
 */
import { RedisStore } from '@tollgate/core'
import type { TollgateOptions } from '@tollgate/fastify'
import type { FastifyServerOptions } from 'fastify'
import { fastifyTestbed, freshPrefix, inject, MAJORS, rateLimitHeader, statuses } from '../test/helpers'

const { limiter, appWith: on, redis } = fastifyTestbed()
/** A prefix's state keys: its limiters' top set of refused identities (`{~h:t}`) left out. */
const stateKeys = async (prefix: string) =>
  (await redis().keys(`${prefix}:*`)).filter((k) => !k.includes('{~h:t}'))

describe.each(MAJORS)('%s', (_major, Fastify) => {
  const appWith = (options: TollgateOptions, server?: FastifyServerOptions) => on(Fastify, options, server)
  describe('per-route config', () => {
    it('config.rateLimit: false leaves the route unlimited and without headers', async () => {
      const app = await appWith({ limiter: limiter(1) })
      app.get('/health', { config: { rateLimit: false } }, async () => 'ok')
      expect(await statuses(app, 4, '/health')).toEqual([200, 200, 200, 200])
      expect(rateLimitHeader(await inject(app, '/health'))).toBeUndefined()
    })

    it('own limits: a stricter budget of its own (route-scoped key) on the plugin limiter’s store', async () => {
      const wide = limiter(10)
      const app = await appWith({ limiter: wide })
      app.get('/search', { config: { rateLimit: { limit: 2, window: '1m' } } }, async () => 'ok')
      app.get('/other', async () => 'ok')
      const first = await inject(app, '/search')
      expect(first.headers['ratelimit-policy']).toMatch(/^"default";q=2;w=60;/)
      expect(await statuses(app, 2, '/search')).toEqual([200, 429])
      // The app-wide budget was not spent by /search.
      expect(rateLimitHeader(await inject(app, '/other'))).toMatch(/^"default";r=9;/)
      // On the plugin limiter's store and prefix, keyed `<ip> /search` (no method).
      expect(await redis().keys(`${wide.prefix}:{127.0.0.1 /search}*`)).toHaveLength(1)
    })

    it('a route limiter: every method of the route shares one budget', async () => {
      const app = await appWith({ limiter: limiter(100) })
      const route = limiter(2)
      app.route({
        method: ['GET', 'POST'],
        url: '/items',
        config: { rateLimit: { limiter: route } },
        handler: async () => 'ok',
      })
      expect((await inject(app, { method: 'GET', url: '/items' })).statusCode).toBe(200)
      expect((await inject(app, { method: 'HEAD', url: '/items' })).statusCode).toBe(200)
      expect((await inject(app, { method: 'GET', url: '/items?x=1' })).statusCode).toBe(429)
      expect(await statuses(app, 1, '/items', { method: 'POST' })).toEqual([429])
    })

    it('a key inherited from the plugin is scoped to the route; a route’s own key is used as given', async () => {
      const store = new RedisStore(redis())
      const prefix = freshPrefix()
      const app = await appWith({
        store,
        prefix,
        limit: 3,
        window: '1m',
        key: (req) => `user:${req.headers['x-user']}`,
      })
      app.get('/wide', async () => 'ok')
      app.get('/strict', { config: { rateLimit: { limit: 1 } } }, async () => 'ok')
      app.get(
        '/own',
        { config: { rateLimit: { limit: 1, key: (req) => `acct:${req.headers['x-user']}` } } },
        async () => 'ok',
      )
      const alice = { headers: { 'x-user': 'alice' } }
      expect(await statuses(app, 2, '/strict', alice)).toEqual([200, 429])
      expect(await statuses(app, 4, '/wide', alice)).toEqual([200, 200, 200, 429])
      expect(await statuses(app, 2, '/own', alice)).toEqual([200, 429])
      expect((await stateKeys(prefix)).sort()).toEqual(
        [
          `${prefix}:{acct:alice}:sw-1m`,
          `${prefix}:{user:alice /strict}:sw-1m`,
          `${prefix}:{user:alice}:sw-1m`,
        ].sort(),
      )
    })

    it('group: an inherited key is scoped to the group, so the group’s routes share one budget', async () => {
      const store = new RedisStore(redis())
      const prefix = freshPrefix()
      const app = await appWith({
        store,
        prefix,
        limit: 3,
        window: '1m',
        key: (req) => `user:${req.headers['x-user']}`,
      })
      app.get('/search', { config: { rateLimit: { limit: 2, group: 'search' } } }, async () => 'ok')
      app.get('/suggest', { config: { rateLimit: { limit: 2, group: 'search' } } }, async () => 'ok')
      const alice = { headers: { 'x-user': 'alice' } }
      expect(await statuses(app, 1, '/search', alice)).toEqual([200])
      expect(await statuses(app, 2, '/suggest', alice)).toEqual([200, 429])
      expect(await stateKeys(prefix)).toEqual([`${prefix}:{user:alice group:search}:sw-1m`])
    })

    it('route options inherit headers, cost and onLimited from the plugin and may override them', async () => {
      const app = await appWith({ limiter: limiter(10), headers: 'draft-7', cost: 2 })
      app.get(
        '/a',
        { config: { rateLimit: { limit: 5, window: '1m', algorithm: 'fixed-window' } } },
        async () => 'ok',
      )
      app.get(
        '/b',
        { config: { rateLimit: { limit: 5, window: '1m', headers: 'ietf', cost: 1 } } },
        async () => 'ok',
      )
      expect((await inject(app, '/a')).headers.ratelimit).toMatch(/^limit=5, remaining=3, reset=\d+$/)
      expect(rateLimitHeader(await inject(app, '/b'))).toMatch(/^"default";r=4;/)
    })

    it('multi-policy route options replace a single inherited policy', async () => {
      const app = await appWith({
        store: new RedisStore(redis()),
        prefix: freshPrefix(),
        limit: 100,
        window: '1m',
      })
      const policies = {
        burst: { limit: 1, window: '1s' as const },
        hourly: { limit: 50, window: '1h' as const },
      }
      app.get('/p', { config: { rateLimit: { policies } } }, async () => 'ok')
      const res = await inject(app, '/p')
      expect(res.headers['ratelimit-policy']).toMatch(
        /^"burst";q=1;w=1;pk=:[^:]+:, "hourly";q=50;w=3600;pk=:[^:]+:$/,
      )
      expect((await inject(app, '/p')).json()['violated-policies']).toEqual(['burst'])
    })

    it('a concurrency limit on one route replaces the plugin’s rate; the slot comes back after the reply', async () => {
      const app = await appWith({
        store: new RedisStore(redis()),
        prefix: freshPrefix(),
        limit: 100,
        window: '1m',
      })
      let open!: () => void
      const gate = new Promise<void>((resolve) => {
        open = resolve
      })
      let running = 0
      app.get('/report', { config: { rateLimit: { concurrency: 1, lease: '30s' } } }, async () => {
        running++
        await gate
        return 'ok'
      })
      const first = inject(app, '/report')
      while (running === 0) await new Promise((resolve) => setTimeout(resolve, 5))
      const busy = await inject(app, '/report')
      expect(busy.statusCode).toBe(429)
      expect(busy.headers['ratelimit-policy']).toMatch(/^"default";q=1;qu="concurrent-requests";pk=:[^:]+:$/)
      open()
      expect((await first).statusCode).toBe(200)
      let again = 429
      for (let i = 0; i < 200 && again === 429; i++) {
        again = (await inject(app, '/report')).statusCode // the release lands just after the reply
        if (again === 429) await new Promise((resolve) => setTimeout(resolve, 10))
      }
      expect(again).toBe(200)
    })

    it('skipFailedRequests on a route: responses >= 400 are refunded once Fastify has sent them', async () => {
      const app = await appWith({ limiter: limiter(2) })
      app.get('/fail', { config: { rateLimit: { skipFailedRequests: true } } }, async (_req, reply) =>
        reply.code(500).send('no'),
      )
      app.get('/ok', { config: { rateLimit: { skipFailedRequests: true } } }, async () => 'ok')
      expect(await statuses(app, 5, '/fail')).toEqual([500, 500, 500, 500, 500])
      expect(await statuses(app, 3, '/ok')).toEqual([200, 200, 429])
    })
  })

  describe('hooks', () => {
    it("hook: 'preHandler' sees the parsed body: a key on body.email", async () => {
      const app = await appWith({ limiter: limiter(100) })
      let calls = 0
      app.post(
        '/login',
        {
          config: {
            rateLimit: {
              limiter: limiter(2),
              hook: 'preHandler',
              key: (req) => `email:${(req.body as { email: string }).email}`,
            },
          },
        },
        async () => ++calls,
      )
      const login = (email: string) => inject(app, { method: 'POST', url: '/login', payload: { email } })
      expect((await login('a@x.test')).statusCode).toBe(200)
      expect((await login('a@x.test')).statusCode).toBe(200)
      expect((await login('a@x.test')).statusCode).toBe(429)
      expect((await login('b@x.test')).statusCode).toBe(200)
      expect(calls).toBe(3)
    })

    it("'onRequest' (the default) runs before the body is read; a preHandler auth hook runs before 'preHandler'", async () => {
      const seen: Array<unknown> = []
      const app = await appWith({
        limiter: limiter(100),
        hook: 'preHandler',
        key: (req) => `user:${req.testUser}`,
      })
      app.decorateRequest('testUser', '')
      app.addHook('preHandler', async (req) => {
        req.testUser = String(req.headers.authorization)
      })
      app.post(
        '/early',
        {
          config: {
            rateLimit: {
              hook: 'onRequest',
              key: (req) => {
                seen.push(req.body)
                return 'k'
              },
            },
          },
        },
        async () => 'ok',
      )
      app.get('/me', async (req) => req.rateLimit?.policies[0]?.key)
      await inject(app, { method: 'POST', url: '/early', payload: { a: 1 } })
      expect(seen).toEqual([undefined])
      // PolicyDecision.key: the identity as given (older core builds: the Redis key built from it).
      expect((await inject(app, { url: '/me', headers: { authorization: 'tok' } })).body).toMatch(
        /^(user:tok|.+:\{user:tok\}:sw-1m)$/,
      )
    })
  })
})
