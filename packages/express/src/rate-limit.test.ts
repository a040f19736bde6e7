/**
 * Express-specific behaviour on Express 5 and 4: `req.rateLimit`, `onLimited`, errors to `next(err)`,
 * routers and the route-template key, tiers, a reserved policy's headers, the trust-proxy warning, and a
 * request refunded by `skipFailedRequests` and by the app itself giving its spend back once.
 * (The shared behaviour is in test/conformance.test.ts, through the testkit HTTP suite.)
 */
import { type Decision, RateLimiter, RedisStore } from '@tollgate/core'
import { ALGORITHMS } from '@tollgate/core/scripts'
import { rateLimit } from '@tollgate/express'
import { at, clearOfBoundary } from '@tollgate/testkit'
import express from 'express'
import express4 from 'express4'
import { createClient } from 'redis'
import request from 'supertest'

const DAY = 86_400_000
let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const limiter = (limit: number, extra: object = {}) =>
  new RateLimiter({
    store,
    prefix: `express-test-${process.pid}-${Date.now()}-${++n}`,
    limit,
    window: '1m',
    ...extra,
  })

beforeAll(async () => {
  redis = createClient({ url: process.env.REDIS_URL })
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis.quit()
})

describe.each([
  ['express 5', express as any],
  ['express 4', express4 as any],
])('%s', (_name, expressFn: any) => {
  it('req.rateLimit holds the decision for the handler', async () => {
    const app = expressFn()
    app.use(rateLimit({ limiter: limiter(3) }))
    app.get('/', (req: express.Request, res: express.Response) => {
      res.json({
        remaining: req.rateLimit?.remaining,
        limit: req.rateLimit?.limit,
        allowed: req.rateLimit?.allowed,
      })
    })
    const res = await request(app).get('/')
    expect(res.body).toEqual({ remaining: 2, limit: 3, allowed: true })
  })

  it('onLimited answers refusals in its own way, headers already set', async () => {
    const seen: Decision[] = []
    const app = expressFn()
    app.use(
      rateLimit({
        limiter: limiter(1),
        onLimited: (req, res, _next, decision) => {
          seen.push(decision)
          expect(req.rateLimit).toBe(decision)
          res.status(429).json({ error: 'slow down' })
        },
      }),
    )
    app.get('/', (_req: any, res: any) => res.send('ok'))
    await request(app).get('/').expect(200)
    const res = await request(app).get('/').expect(429)
    expect(res.body).toEqual({ error: 'slow down' })
    expect(res.headers.ratelimit).toMatch(/^"default";r=0;t=\d+;pk=:/)
    expect(res.headers['retry-after']).toMatch(/^\d+$/)
    expect(seen).toHaveLength(1)
    expect(at(seen, 0).allowed).toBe(false)
  })

  it('onLimited may call next() to let the request through', async () => {
    const app = expressFn()
    app.use(rateLimit({ limiter: limiter(1), onLimited: (_req, _res, next) => next() }))
    app.get('/', (_req: any, res: any) => res.send('through'))
    await request(app).get('/').expect(200)
    await request(app).get('/').expect(200, 'through')
  })

  it('errors go to next(err): a throwing key, a rejecting key, a throwing onLimited', async () => {
    const errors: string[] = []
    const app = expressFn()
    app.get(
      '/sync',
      rateLimit({
        limiter: limiter(5),
        key: () => {
          throw new Error('sync key failed')
        },
      }),
      (_req: any, res: any) => res.send('no'),
    )
    app.get(
      '/async',
      rateLimit({ limiter: limiter(5), key: async () => Promise.reject(new Error('async key failed')) }),
      (_req: any, res: any) => res.send('no'),
    )
    app.get(
      '/limited',
      rateLimit({
        limiter: limiter(1),
        onLimited: async () => {
          throw new Error('onLimited failed')
        },
      }),
      (_req: any, res: any) => res.send('ok'),
    )
    app.use((err: Error, _req: any, res: any, _next: any) => {
      errors.push(err.message)
      res.status(500).send('handled')
    })
    await request(app).get('/sync').expect(500, 'handled')
    await request(app).get('/async').expect(500, 'handled')
    await request(app).get('/limited').expect(200)
    await request(app).get('/limited').expect(500, 'handled')
    expect(errors).toEqual(['sync key failed', 'async key failed', 'onLimited failed'])
  })

  it('a router: the key is the mount path + route template, case-insensitively', async () => {
    const api = limiter(2)
    const router = expressFn.Router()
    router.get('/users/:id', rateLimit({ limiter: api }), (_req: any, res: any) => res.send('user'))
    router.get('/teams/:id', rateLimit({ limiter: api }), (_req: any, res: any) => res.send('team'))
    const app = expressFn()
    app.use('/api', router)
    await request(app).get('/api/users/1').expect(200)
    await request(app).get('/API/users/2').expect(200)
    await request(app).get('/api/Users/3/').expect(429)
    await request(app).get('/api/teams/1').expect(200)
  })

  it('app.use after a route that called next(): keyed on the IP, not the stale req.route', async () => {
    const api = limiter(2)
    const app = expressFn()
    app.get('/a/:id', (_req: any, _res: any, next: any) => next())
    app.use(rateLimit({ limiter: api }))
    app.get('/a/:id', (_req: any, res: any) => res.send('a'))
    app.get('/b', (_req: any, res: any) => res.send('b'))
    await request(app).get('/a/1').expect(200)
    await request(app).get('/b').expect(200)
    await request(app).get('/a/2').expect(429)
  })

  it('tiers: limiter as a function of the request', async () => {
    const free = limiter(1)
    const pro = limiter(3)
    const app = expressFn()
    app.use(rateLimit({ limiter: (req) => (req.get('x-plan') === 'pro' ? pro : free) }))
    app.get('/', (_req: any, res: any) => res.send('ok'))
    const codes = async (plan: string) => {
      const out: number[] = []
      for (let i = 0; i < 4; i++) out.push((await request(app).get('/').set('x-plan', plan)).status)
      return out
    }
    expect(await codes('pro')).toEqual([200, 200, 200, 429])
    expect(await codes('free')).toEqual([200, 429, 429, 429])
  })

  it('a reserved policy keeps its RateLimit headers sane: never negative, 429 after the limit', async () => {
    await clearOfBoundary(DAY, 60_000)
    const reserved = limiter(12, { window: DAY, algorithm: 'fixed-window', reserve: 5 })
    const app = expressFn()
    app.use(rateLimit({ limiter: reserved, skipFailedRequests: true }))
    app.get('/', (_req: any, res: any) => res.send('ok'))
    app.get('/fail', (_req: any, res: any) => res.status(500).send('no'))
    // failures give their unit back to the process's reserve
    for (let i = 0; i < 3; i++) await request(app).get('/fail').expect(500)
    // each refund is sent once its response has finished; a peek on the same store is answered after them
    await reserved.peek('barrier')
    const statuses: number[] = []
    const remaining: number[] = []
    for (let i = 0; i < 14; i++) {
      const res = await request(app).get('/')
      statuses.push(res.status)
      remaining.push(Number(/;r=(\d+);/.exec(res.headers.ratelimit ?? '')?.[1]))
    }
    expect(statuses).toEqual([...new Array(12).fill(200), 429, 429])
    expect(remaining).toEqual([11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0])
  })
})

describe('construction', () => {
  it('rejects a non-function onLimited and unknown options with ConfigError', () => {
    expect(() => rateLimit({ limiter: limiter(1), onLimited: 'no' as any })).toThrow(
      expect.objectContaining({ code: 'ERR_TOLLGATE_CONFIG', option: 'onLimited' }),
    )
    expect(() => rateLimit({ limiter: limiter(1), max: 5 } as any)).toThrow(
      expect.objectContaining({ code: 'ERR_TOLLGATE_CONFIG', option: 'max' }),
    )
  })
})

describe('trust proxy warning', () => {
  it("warns once when 'trust proxy' is true, never for a hop count", async () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
    try {
      const build = (trust: unknown) => {
        const app = express()
        app.set('trust proxy', trust)
        app.use(rateLimit({ limiter: limiter(100) }))
        app.get('/', (_req, res) => {
          res.send('ok')
        })
        return app
      }
      await request(build(1)).get('/').expect(200)
      await request(build('loopback')).get('/').expect(200)
      expect(warn).not.toHaveBeenCalled()
      const permissive = build(true)
      await request(permissive).get('/').expect(200)
      await request(permissive).get('/').expect(200)
      await request(build(true)).get('/').expect(200)
      expect(warn).toHaveBeenCalledTimes(1)
      expect(at(warn.mock.calls, 0)[0]).toMatch(/WARN_TOLLGATE_PERMISSIVE_TRUST_PROXY.*trust proxy/)
    } finally {
      warn.mockRestore()
    }
  })
})

describe('two middlewares with inline options, default prefix, different policies', () => {
  it('on one store: ConfigError at construction, naming both', () => {
    const one = new RedisStore(redis)
    rateLimit({ store: one, limit: 100, window: '1m' })
    expect(() => rateLimit({ store: one, limit: 3, window: '1h' })).toThrow(
      /prefix must be .*"tollgate" \(sliding-window 3\/1h\).*"tollgate" \(sliding-window 100\/1m\)/,
    )
  })

  it('on one client, each with its own store: ConfigError as well', () => {
    rateLimit({ store: new RedisStore(redis), limit: 100, window: '1m' })
    expect(() => rateLimit({ store: new RedisStore(redis), limit: 3, window: '1h' })).toThrow(
      /prefix must be .*"tollgate" \(sliding-window 3\/1h\).*"tollgate" \(sliding-window 100\/1m\)/,
    )
  })

  it('on two clients (two processes, one Redis): the stricter admits 3 of 8', async () => {
    // a fresh identity: the default prefix is shared with every other test on this Redis
    const id = `express-two-${process.pid}-${Date.now()}`
    const clients = [
      createClient({ url: process.env.REDIS_URL }),
      createClient({ url: process.env.REDIS_URL }),
    ]
    await Promise.all(clients.map((c) => c.connect()))
    try {
      const app = express()
      app.use(rateLimit({ store: new RedisStore(clients[0]), limit: 100, window: '1m', key: () => id }))
      app.use(rateLimit({ store: new RedisStore(clients[1]), limit: 3, window: '1h', key: () => id }))
      app.get('/', (_req, res) => res.send('ok'))
      const out: number[] = []
      for (let i = 0; i < 8; i++) out.push((await request(app).get('/')).status)
      expect(out).toEqual([200, 200, 200, 429, 429, 429, 429, 429])
    } finally {
      await Promise.all(clients.map((c) => c.quit()))
    }
  })
})

// Two refund paths for one request (the adapter's and the app's) must give back one spend, not two:
// otherwise a failing route hands out other clients' spends.
it.each(ALGORITHMS)(
  '%s: skipFailedRequests plus the app refunding the same request: one refund',
  async (algorithm) => {
    const limiter = new RateLimiter({
      store: new RedisStore(redis),
      prefix: `express-once-${process.pid}-${algorithm}`,
      limit: 5,
      // a day, not a minute: a fixed window's boundary inside this ~0.5 s sequence would (rightly) give a
      // new budget
      window: '1d',
      algorithm,
      denyCache: false,
    })
    const app = express()
    app.use(rateLimit({ limiter, key: () => 'client', skipFailedRequests: true }))
    app.get('/ok', (_req, res) => {
      res.send('ok')
    })
    app.get('/fail', async (req: any, res) => {
      await limiter.refund(req.rateLimit) // the app gives it back too (e.g. shared error handling)
      res.status(500).send('fail')
    })
    let ok = 0
    const hit = async (path: string) => {
      const res = await request(app).get(path)
      if (path === '/ok' && res.status === 200) ok++
      // the adapter's refund runs once the response is finished: let it land before the next request
      await new Promise((resolve) => setTimeout(resolve, 20))
      return res.status
    }
    for (let i = 0; i < 3; i++) await hit('/ok')
    for (let i = 0; i < 3; i++) expect(await hit('/fail')).toBe(500)
    for (let i = 0; i < 5; i++) await hit('/ok')
    expect(ok).toBe(5)
  },
)
