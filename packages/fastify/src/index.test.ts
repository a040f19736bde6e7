/**
 * The plugin's app-wide limiter, through `inject(app, )` against the suite's real Redis: global by
 * default, global: false, not-found limiting, two plugins on one app, and the `settle` option (the true
 * cost, from a reply header or a function). The shared HTTP behaviour (headers, keys, IPs, refunds, store
 * failure) is the conformance suite's, in test/conformance.test.ts.
 */
import { RedisStore } from '@tollgate/core'
import tollgate, { type TollgateOptions } from '@tollgate/fastify'
import { remainingIn, settleLimiters } from '@tollgate/testkit/settle-limiters'
import Fastify, { type FastifyServerOptions } from 'fastify'
import {
  connect,
  fastifyTestbed,
  freshPrefix,
  inject,
  MAJORS,
  QUOTA_EXCEEDED,
  rateLimitHeader,
  statuses,
} from '../test/helpers'

const { apps, limiter, appWith: on, redis } = fastifyTestbed()

describe.each(MAJORS)('%s', (_major, Fastify) => {
  const appWith = (options: TollgateOptions, server?: FastifyServerOptions) => on(Fastify, options, server)
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
        store: new RedisStore(redis()),
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
})

describe('two plugins with inline options, default prefix, different policies', () => {
  it('on one store: ConfigError at construction, naming both', async () => {
    const store = new RedisStore(redis())
    const app = Fastify()
    apps.push(app)
    await app.register(tollgate, { store, limit: 100, window: '1m' })
    await expect(
      app.register(tollgate, { store, limit: 3, window: '1h' }).then(() => app.ready()),
    ).rejects.toThrow(/"tollgate" \(sliding-window 3\/1h\).*"tollgate" \(sliding-window 100\/1m\)/)
  })

  it('on two clients (two processes, one Redis): the stricter admits 3 of 8', async () => {
    // a fresh identity: the default prefix is shared with every other test on this Redis
    const id = freshPrefix('fastify-two')
    // (two stores over one client are one store: the other process has a client of its own)
    const other = await connect()
    try {
      const app = Fastify()
      apps.push(app)
      await app.register(tollgate, {
        store: new RedisStore(redis()),
        limit: 100,
        window: '1m',
        key: () => id,
      })
      await app.register(tollgate, { store: new RedisStore(other), limit: 3, window: '1h', key: () => id })
      app.get('/', async () => 'ok')
      expect(await statuses(app, 8, '/')).toEqual([200, 200, 200, 429, 429, 429, 429, 429])
    } finally {
      await other.quit()
    }
  })
})

const { tokens } = settleLimiters('fastify')
const remaining = (res: { headers: Record<string, unknown> }) => remainingIn(res.headers.ratelimit as string)

it('settles from a reply header; the next response tells the truth', async () => {
  const { limiter, settled } = tokens()
  const app = Fastify()
  await app.register(tollgate, { limiter, key: () => 'k', cost: 10, settle: { header: 'x-tokens-used' } })
  app.get('/', async (_req, reply) => reply.header('x-tokens-used', '35').send('ok'))
  const first = await inject(app, '/')
  expect(remaining(first)).toBe(90)
  await settled()
  expect(remaining(await inject(app, '/'))).toBe(55)
  await app.close()
})

it('settles from a function on a route, giving back what was not used', async () => {
  const { limiter, settled } = tokens()
  const app = Fastify()
  await app.register(tollgate, { global: false })
  app.get(
    '/',
    { config: { rateLimit: { limiter, key: () => 'k', cost: 40, settle: (req: any) => req.used } } },
    async (req: any) => {
      req.used = 5
      return 'ok'
    },
  )
  await inject(app, '/')
  await settled()
  expect((await limiter.peek('k')).remaining).toBe(95)
  await app.close()
})
