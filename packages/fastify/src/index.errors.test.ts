/**
 * What the plugin answers when things go wrong: onLimited, options that fail the app at startup
 * (naming the option), and per-request errors, on both majors.
 */
import { ConfigError, type RateLimiter, RedisStore } from '@tollgate/core'
import tollgate, { type TollgateOptions } from '@tollgate/fastify'
import type { FastifyServerOptions } from 'fastify'
import { fastifyTestbed, inject, MAJORS, QUOTA_EXCEEDED, rateLimitHeader } from '../test/helpers'

const { apps, limiter, appWith: on, redis } = fastifyTestbed()

describe.each(MAJORS)('%s', (_major, Fastify) => {
  const appWith = (options: TollgateOptions, server?: FastifyServerOptions) => on(Fastify, options, server)
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
      ['limit', () => ({ store: new RedisStore(redis()), limit: 0, window: '1m' })],
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

  describe('a misspelt config.rateLimit', () => {
    it('is warned about when the route is registered, once per route and key; other config keys are not', async () => {
      const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
      try {
        const app = await appWith({ limiter: limiter(1) })
        let calls = 0
        app.get('/typo', { config: { rateLimt: { limit: 100, window: '1m' } } }, async () => ++calls)
        app.get('/case', { config: { ratelimit: false } }, async () => 'ok')
        app.get('/snake', { config: { rate_limit: false, cache: true } }, async () => 'ok')
        app.get('/fine', { config: { rateLimit: { limit: 5, window: '1m' }, cache: true } }, async () => 'ok')
        app.get('/other', { config: { rateLimiter: 'x', cors: true } }, async () => 'ok')
        await app.ready()
        const lines = warn.mock.calls
          .map((c) => String(c[0]))
          .filter((l) => l.includes('WARN_TOLLGATE_ROUTE_CONFIG'))
        expect(lines.map((l) => l.replace(/^.*: (GET|HEAD) /, '$1 '))).toEqual(
          expect.arrayContaining([
            expect.stringMatching(
              /^GET \/typo: config\.rateLimt is not read \(did you mean config\.rateLimit\?\); the route gets the app-wide limit\.$/,
            ),
            expect.stringMatching(/^GET \/case: config\.ratelimit is not read/),
            expect.stringMatching(/^GET \/snake: config\.rate_limit is not read/),
            expect.stringMatching(/^GET \/other: config\.rateLimiter is not read/),
          ]),
        )
        expect(lines.some((l) => l.includes('/fine') || l.includes('cache') || l.includes('cors'))).toBe(
          false,
        )
        expect(lines.filter((l) => l.includes('/typo'))).toHaveLength(1)
        // what the warning says: the typo route is held to the app-wide limit of 1
        expect((await inject(app, '/typo')).statusCode).toBe(200)
        expect((await inject(app, '/typo')).statusCode).toBe(429)
        expect(calls).toBe(1)
      } finally {
        warn.mockRestore()
      }
    })
  })

  describe('per-request errors', () => {
    it("a key function returning '' is a 500 problem (the app's bug), never a pass", async () => {
      const app = await appWith({ limiter: limiter(5), key: () => '' })
      let calls = 0
      app.get('/a', async () => ++calls)
      const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
      const res = await inject(app, '/a')
      warn.mockRestore()
      expect(res.statusCode).toBe(500)
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
