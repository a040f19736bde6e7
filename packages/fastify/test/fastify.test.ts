/**
 * Fastify-specific behaviour of the plugin, through `inject(app, )` against the suite's real Redis: hooks,
 * per-route config and `false`, global: false, not-found limiting, request.rateLimit, onLimited, the
 * trustProxy warning and options that fail the app at startup. The shared HTTP behaviour (headers, keys,
 * IPs, refunds, store failure) is the conformance suite's, in conformance.test.ts.
 */
import { ConfigError, type RateLimiter, RedisStore } from '@tollgate/core'
import tollgate, { type TollgateOptions } from '@tollgate/fastify'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import fastify4 from 'fastify4'
import type { FastifyConstructor } from './factory'
import { connect, freshPrefix, inject, limiterOn, type Redis, type Response } from './helpers'

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

let redis: Redis
const apps: FastifyInstance[] = []
beforeAll(async () => {
  redis = await connect()
})
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()))
})
afterAll(async () => {
  await redis.quit()
})

const limiter = (limit: number, window: number | `${number}s` = '60s') => limiterOn(redis, { limit, window })

async function statuses(app: FastifyInstance, n: number, url: string, init: Record<string, unknown> = {}) {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await inject(app, { url, ...init })).statusCode)
  return out
}

const rateLimitHeader = (res: Response) => res.headers.ratelimit as string | undefined

// First: the trustProxy warning is logged once per process, so these run before any other trustProxy app.
describe('trustProxy warning', () => {
  let warn: jest.SpyInstance
  beforeEach(() => {
    warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
  })
  afterEach(() => warn.mockRestore())

  // The setting is public only through request.ip, so it is read at the first limited request.
  const served = async (
    server: FastifyServerOptions,
    make: FastifyConstructor = Fastify as FastifyConstructor,
  ) => {
    const app = make(server)
    apps.push(app)
    await app.register(tollgate, { limiter: limiter(5) })
    app.get('/', async () => 'ok')
    expect((await inject(app, '/')).statusCode).toBe(200)
  }

  it('a hop count or a proxy list is not warned about', async () => {
    // (Fastify 5.12 treats a hop count as trusting nothing; its types no longer allow one.)
    await served({ trustProxy: 1 as unknown as string })
    await served({ trustProxy: '127.0.0.1' })
    await served({ trustProxy: '127.0.0.1, 10.0.0.0/8' })
    await served({ trustProxy: (address: string) => address === '127.0.0.1' })
    // Fastify 4 still honours a hop count.
    await served({ trustProxy: 1 as unknown as string }, fastify4 as unknown as FastifyConstructor)
    await served({ trustProxy: '127.0.0.1' }, fastify4 as unknown as FastifyConstructor)
    expect(warn).not.toHaveBeenCalled()
  })

  it('trustProxy: true is warned about once, with a stable code', async () => {
    await served({ trustProxy: true }, fastify4 as unknown as FastifyConstructor)
    await served({ trustProxy: true })
    expect(warn).toHaveBeenCalledTimes(1)
    expect(warn.mock.calls[0][0]).toMatch(
      /^\[tollgate\] WARN_TOLLGATE_PERMISSIVE_TRUST_PROXY: Fastify trustProxy: true/,
    )
  })
})

// Every behaviour below on both supported majors (peer range '4.x || 5.x').
describe.each<[string, FastifyConstructor]>([
  ['fastify 5', Fastify as FastifyConstructor],
  ['fastify 4', fastify4 as unknown as FastifyConstructor],
])('%s', (_major, Fastify) => {
  /** A Fastify app of this major with the plugin registered (awaited, so routes declared next are limited). */
  async function appWith(
    options: TollgateOptions,
    server: FastifyServerOptions = {},
  ): Promise<FastifyInstance> {
    const app = Fastify(server)
    apps.push(app)
    await app.register(tollgate, options)
    return app
  }

  describe('global by default', () => {
    it('limits every route on one per-IP budget; 429 is problem+json and the handler does not run', async () => {
      const app = await appWith({ limiter: limiter(3) })
      let calls = 0
      app.get('/a', async () => ++calls)
      app.get('/b/:id', async () => ++calls)
      expect(await statuses(app, 2, '/a')).toEqual([200, 200])
      const third = await inject(app, '/b/1')
      expect(third.statusCode).toBe(200)
      expect(third.headers['ratelimit-policy']).toMatch(/^"default";q=3;w=60;pk=:[A-Za-z0-9+/]{16}:$/)
      expect(rateLimitHeader(third)).toMatch(/^"default";r=0;t=\d+;pk=:[A-Za-z0-9+/]{16}:$/)
      const refused = await inject(app, '/b/2')
      expect(refused.statusCode).toBe(429)
      expect(refused.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1)
      expect(refused.json()).toMatchObject({
        type: QUOTA_EXCEEDED,
        status: 429,
        'violated-policies': ['default'],
      })
      expect(calls).toBe(3)
    })

    it('request.rateLimit carries the decision into the handler', async () => {
      const app = await appWith({ limiter: limiter(5) })
      app.get('/quota', async (request) => ({
        remaining: request.rateLimit?.remaining,
        limit: request.rateLimit?.limit,
      }))
      expect((await inject(app, '/quota')).json()).toEqual({ remaining: 4, limit: 5 })
      expect((await inject(app, '/quota')).json()).toEqual({ remaining: 3, limit: 5 })
    })

    it('inline limiter options (store + limit + window) instead of a limiter', async () => {
      const app = await appWith({
        store: new RedisStore(redis),
        prefix: freshPrefix(),
        limit: 1,
        window: '1m',
      })
      app.get('/a', async () => 'ok')
      expect(await statuses(app, 2, '/a')).toEqual([200, 429])
    })

    it('the handler does not run on 429 even when an async onSend hook delays the response', async () => {
      const app = await appWith({ limiter: limiter(1) })
      app.addHook('onSend', async (_request, _reply, payload) => {
        await new Promise((resolve) => setTimeout(resolve, 5))
        return payload
      })
      let calls = 0
      app.get('/a', async () => ++calls)
      expect(await statuses(app, 3, '/a')).toEqual([200, 429, 429])
      expect(calls).toBe(1)
    })

    it('only routes declared after the plugin loaded are limited, including those of child plugins', async () => {
      const app = await appWith({ limiter: limiter(1) })
      await app.register(async (child) => {
        child.get('/child', async () => 'ok')
      })
      expect(await statuses(app, 2, '/child')).toEqual([200, 429])
    })

    it('registered inside an encapsulated plugin, it limits only that plugin’s routes', async () => {
      const app = Fastify()
      apps.push(app)
      await app.register(
        async (api) => {
          await api.register(tollgate, { limiter: limiter(1) })
          api.get('/x', async () => 'ok')
        },
        { prefix: '/api' },
      )
      app.get('/open', async () => 'ok')
      expect(await statuses(app, 2, '/api/x')).toEqual([200, 429])
      const open = await inject(app, '/open')
      expect(await statuses(app, 3, '/open')).toEqual([200, 200, 200])
      expect(rateLimitHeader(open)).toBeUndefined()
    })

    it('registered again in a child scope, both limits apply to the child’s routes', async () => {
      const outer = limiter(3)
      const app = await appWith({ limiter: outer })
      await app.register(async (child) => {
        await child.register(tollgate, { limiter: limiter(1) })
        child.get('/inner', async (request) => request.rateLimit?.limit)
      })
      app.get('/outer', async () => 'ok')
      const first = await inject(app, '/inner')
      expect([first.statusCode, first.body]).toEqual([200, '1'])
      expect(await statuses(app, 1, '/inner')).toEqual([429])
      expect(await statuses(app, 2, '/outer')).toEqual([200, 429])
    })
  })

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
      expect(await redis.keys(`${wide.prefix}:{127.0.0.1 /search}*`)).toHaveLength(1)
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
      const store = new RedisStore(redis)
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
      expect((await redis.keys(`${prefix}:*`)).sort()).toEqual(
        [
          `${prefix}:{acct:alice}:sw-1m`,
          `${prefix}:{user:alice /strict}:sw-1m`,
          `${prefix}:{user:alice}:sw-1m`,
        ].sort(),
      )
    })

    it('group: an inherited key is scoped to the group, so the group’s routes share one budget', async () => {
      const store = new RedisStore(redis)
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
      expect(await redis.keys(`${prefix}:*`)).toEqual([`${prefix}:{user:alice group:search}:sw-1m`])
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
        store: new RedisStore(redis),
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
        store: new RedisStore(redis),
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
      app.get('/me', async (req) => req.rateLimit?.policies[0].key)
      await inject(app, { method: 'POST', url: '/early', payload: { a: 1 } })
      expect(seen).toEqual([undefined])
      // PolicyDecision.key: the identity as given (older core builds: the Redis key built from it).
      expect((await inject(app, { url: '/me', headers: { authorization: 'tok' } })).body).toMatch(
        /^(user:tok|.+:\{user:tok\}:sw-1m)$/,
      )
    })
  })

  describe('global: false', () => {
    it('limits only the routes that opt in', async () => {
      const app = await appWith({ global: false, limiter: limiter(1) })
      app.get('/free', async () => 'ok')
      app.get('/paid', { config: { rateLimit: {} } }, async () => 'ok')
      expect(await statuses(app, 3, '/free')).toEqual([200, 200, 200])
      expect(rateLimitHeader(await inject(app, '/free'))).toBeUndefined()
      expect(await statuses(app, 2, '/paid')).toEqual([200, 429])
    })

    it('with no plugin-level limiter, each route brings its own', async () => {
      const app = await appWith({ global: false, headers: 'draft-6' })
      app.get('/a', { config: { rateLimit: { limiter: limiter(1) } } }, async () => 'ok')
      const res = await inject(app, '/a')
      expect(res.headers['ratelimit-limit']).toBe('1')
      expect((await inject(app, '/a')).statusCode).toBe(429)
    })
  })

  describe('not-found limiting', () => {
    it('404s are not limited unless asked', async () => {
      const app = await appWith({ limiter: limiter(1) })
      expect(await statuses(app, 3, '/nope')).toEqual([404, 404, 404])
    })

    it('notFound: true limits 404s on the app-wide budget, with the default handler', async () => {
      const app = await appWith({ limiter: limiter(2), notFound: true })
      app.get('/a', async () => 'ok')
      expect(await statuses(app, 2, '/scan/1')).toEqual([404, 404])
      const refused = await inject(app, '/scan/2')
      expect(refused.statusCode).toBe(429)
      expect(refused.json()).toMatchObject({ type: QUOTA_EXCEEDED })
      expect((await inject(app, '/a')).statusCode).toBe(429)
    })

    it('notFound: true limits a custom not-found handler too, in the configured hook', async () => {
      const app = await appWith({ limiter: limiter(1), notFound: true, hook: 'preHandler', global: false })
      let calls = 0
      app.setNotFoundHandler(async (_req, reply) => {
        calls++
        return reply.code(404).send({ missing: true })
      })
      app.get('/a', async () => 'ok')
      expect(await statuses(app, 3, '/nope')).toEqual([404, 429, 429])
      expect(calls).toBe(1)
      expect(await statuses(app, 2, '/a')).toEqual([200, 200])
    })
  })

  describe('onLimited', () => {
    const setup = async (onLimited: TollgateOptions['onLimited'], calls = { n: 0 }) => {
      const app = await appWith({ limiter: limiter(1), onLimited })
      app.get('/a', async () => ++calls.n)
      expect((await inject(app, '/a')).statusCode).toBe(200)
      return inject(app, '/a')
    }

    it('its return value is the 429 body; the headers are already set', async () => {
      const res = await setup((request, _reply, decision) => ({
        slowDown: true,
        retryInMs: decision.retryAfterMs,
        url: request.url,
      }))
      expect(res.statusCode).toBe(429)
      expect(res.json()).toMatchObject({ slowDown: true, url: '/a' })
      expect(res.json().retryInMs).toBeGreaterThan(0)
      expect(res.headers['retry-after']).toBeDefined()
      expect(rateLimitHeader(res)).toMatch(/^"default";r=0;/)
    })

    it('it may send the reply itself (and return it), with another status', async () => {
      const calls = { n: 0 }
      const res = await setup(
        async (_request, reply) => reply.code(503).header('x-why', 'quota').send('busy'),
        calls,
      )
      expect([res.statusCode, res.body, res.headers['x-why']]).toEqual([503, 'busy', 'quota'])
      expect(calls.n).toBe(1)
    })

    it('returning undefined sends the default problem body (onLimited as a listener)', async () => {
      const seen: number[] = []
      const res = await setup((_request, _reply, decision) => {
        seen.push(decision.remaining)
      })
      expect(res.statusCode).toBe(429)
      expect(res.json()).toMatchObject({ type: QUOTA_EXCEEDED })
      expect(seen).toEqual([0])
    })

    it('a route may set its own', async () => {
      const app = await appWith({ limiter: limiter(5), onLimited: () => 'plugin' })
      app.get(
        '/a',
        { config: { rateLimit: { limit: 1, window: '1m', onLimited: () => 'route' } } },
        async () => 'ok',
      )
      await inject(app, '/a')
      expect((await inject(app, '/a')).body).toBe('route')
    })
  })

  describe('bad options fail the app at startup, naming the option', () => {
    const rejects = async (options: unknown, option: string) => {
      const app = Fastify()
      apps.push(app)
      app.register(tollgate, options as TollgateOptions)
      const error = await app.ready().then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(ConfigError)
      expect(error).toMatchObject({ code: 'ERR_TOLLGATE_CONFIG', option })
    }

    it.each<[string, (l: RateLimiter) => unknown]>([
      ['limiter', () => ({})],
      ['limiter', () => ({ limiter: 'api' })],
      ['windowMs', (l) => ({ limiter: l, windowMs: 1000 })],
      ['hook', (l) => ({ limiter: l, hook: 'onSend' })],
      ['global', (l) => ({ limiter: l, global: 'yes' })],
      ['notFound', (l) => ({ limiter: l, notFound: 1 })],
      ['headers', (l) => ({ global: false, limiter: l, headers: 'ietf-9' })],
      ['cost', () => ({ global: false, cost: -1 })],
      ['limit', () => ({ store: new RedisStore(redis), limit: 0, window: '1m' })],
      ['options', () => 'fast'],
    ])('plugin option %s', async (option, make) => {
      await rejects(make(limiter(1)), option)
    })

    it('route options in a plugin: app.ready() rejects, the message names the route', async () => {
      const app = await appWith({ limiter: limiter(5) })
      app.register(async (child) => {
        child.get(
          '/x',
          { config: { rateLimit: { limit: 5, window: '1 minute' as never } } },
          async () => 'ok',
        )
      })
      const error = await app.ready().then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(ConfigError)
      expect(error).toMatchObject({ option: 'window' })
      expect((error as Error).message).toMatch(/^GET \/x: config\.rateLimit\.window must be/)
    })

    it('route options at the top level: app.get() throws, like Fastify’s own route errors', async () => {
      const app = await appWith({ limiter: limiter(5) })
      expect(() =>
        app.get(
          '/y',
          { config: { rateLimit: { limiter: limiter(1), hook: 'onResponse' as never } } },
          async () => 'ok',
        ),
      ).toThrow(expect.objectContaining({ option: 'hook' }))
      expect(() => app.get('/z', { config: { rateLimit: true as never } }, async () => 'ok')).toThrow(
        expect.objectContaining({
          option: 'config.rateLimit',
          message: expect.stringMatching(/^GET \/z: config\.rateLimit must be/),
        }),
      )
      expect(() =>
        app.get('/w', { config: { rateLimit: { global: false } as never } }, async () => 'ok'),
      ).toThrow(expect.objectContaining({ option: 'global' }))
    })
  })

  describe('per-request errors', () => {
    it("a key function returning '' is a 400 problem, never a pass", async () => {
      const app = await appWith({ limiter: limiter(5), key: () => '' })
      let calls = 0
      app.get('/a', async () => ++calls)
      const res = await inject(app, '/a')
      expect(res.statusCode).toBe(400)
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(calls).toBe(0)
    })

    it('a key function that throws goes to Fastify’s error handler', async () => {
      const app = await appWith({
        limiter: limiter(5),
        key: () => {
          throw new Error('boom')
        },
      })
      app.get('/a', async () => 'ok')
      expect((await inject(app, '/a')).statusCode).toBe(500)
    })
  })
})

declare module 'fastify' {
  interface FastifyRequest {
    testUser: string
  }
}

describe('two plugins with inline options, default prefix, different policies', () => {
  it('on one store: ConfigError at construction, naming both', async () => {
    const store = new RedisStore(redis)
    const app = Fastify()
    apps.push(app)
    await app.register(tollgate, { store, limit: 100, window: '1m' })
    await expect(
      app.register(tollgate, { store, limit: 3, window: '1h' }).then(() => app.ready()),
    ).rejects.toThrow(/"tollgate" \(sliding-window 3\/1h\).*"tollgate" \(sliding-window 100\/1m\)/)
  })

  it('on two stores (two processes, one Redis): the stricter admits 3 of 8', async () => {
    // a fresh identity: the default prefix is shared with every other test on this Redis
    const id = freshPrefix('fastify-two')
    const app = Fastify()
    apps.push(app)
    await app.register(tollgate, { store: new RedisStore(redis), limit: 100, window: '1m', key: () => id })
    await app.register(tollgate, { store: new RedisStore(redis), limit: 3, window: '1h', key: () => id })
    app.get('/', async () => 'ok')
    expect(await statuses(app, 8, '/')).toEqual([200, 200, 200, 429, 429, 429, 429, 429])
  })
})
