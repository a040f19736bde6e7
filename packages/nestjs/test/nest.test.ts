/**
 * What the shared HTTP suite does not cover: Nest's own ways of applying the guard (APP_GUARD,
 * @UseGuards, controller-level and handler-level decorators, forRootAsync, exception filters), and that
 * its headers are the bytes @tollgate/express sends for the same limiter. Both platforms, real Redis.
 */
import 'reflect-metadata'
import type { Server } from 'node:http'
import {
  type ArgumentsHost,
  Catch,
  Controller,
  type ExceptionFilter,
  Get,
  type INestApplication,
  Inject,
  Module,
  Req,
  UseGuards,
} from '@nestjs/common'
import { APP_FILTER, APP_GUARD, NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { ConfigError, RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import { at } from '@tollgate/testkit/checked'
import { request, type SuiteResponse } from '@tollgate/testkit/http-suite'
import express from 'express'
import { createClient } from 'redis'
import {
  RateLimit,
  RateLimitException,
  SkipRateLimit,
  TollgateGuard,
  TollgateModule,
  type TollgateOptions,
} from '../src'
import type { Platform } from './factory'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let counter = 0
const open: Array<() => Promise<void>> = []

beforeAll(async () => {
  redis = createClient({ url: process.env.REDIS_URL })
  redis.on('error', () => undefined)
  await redis.connect()
  store = new RedisStore(redis)
})
afterEach(async () => {
  await Promise.all(open.splice(0).map((close) => close()))
})
afterAll(async () => {
  await redis?.quit()
})

function limiter(options: Omit<RateLimiterOptions, 'store' | 'prefix'>): RateLimiter {
  return new RateLimiter({ store, prefix: `nest-${process.pid}-${++counter}`, ...options })
}

async function listen(server: Server, close: () => Promise<unknown>): Promise<string> {
  open.push(async () => {
    const closing = close()
    server.closeAllConnections()
    await closing
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return `http://127.0.0.1:${address.port}`
}

async function nestApp(platform: Platform, module: new () => object): Promise<string> {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter()
  const app: INestApplication = await NestFactory.create(module, adapter, {
    logger: false,
    abortOnError: false,
  })
  await app.listen(0, '127.0.0.1')
  return listen(app.getHttpServer(), () => app.close())
}

async function expressApp(build: (app: express.Express) => void): Promise<string> {
  const app = express()
  build(app)
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
  return listen(server, () => new Promise((resolve) => server.close(resolve)))
}

/** A module with the given controllers, TollgateModule.forRoot(options) and the guard app-wide. */
function appModule(options: TollgateOptions | undefined, controllers: Array<new (...a: any[]) => object>) {
  @Module({
    imports: [TollgateModule.forRoot(options)],
    controllers,
    providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
  })
  class AppModule {}
  return AppModule
}

const HEADERS = [
  'ratelimit',
  'ratelimit-policy',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'content-type',
]
/** The Tollgate part of a response, byte for byte (the reset epoch is compared within a second). */
function tollgatePart(res: SuiteResponse) {
  const headers = Object.fromEntries(HEADERS.map((h) => [h, res.headers[h]]))
  const reset = Number(headers['x-ratelimit-reset'])
  delete headers['x-ratelimit-reset']
  const contentType = String(headers['content-type'] ?? '')
  // A JSON handler body differs per framework; a problem body is the same document.
  if (!contentType.startsWith('application/problem+json')) delete headers['content-type']
  return { status: res.status, headers, reset, body: res.status === 200 ? undefined : res.json() }
}

async function sequence(url: string, path: string, n: number) {
  const out = []
  for (let i = 0; i < n; i++) out.push(tollgatePart(await request(url, path)))
  return out
}

@Controller()
class HelloController {
  @Get('hello')
  hello(@Req() req: { rateLimit?: { remaining: number } }) {
    return { remaining: req.rateLimit?.remaining ?? null }
  }
}

describe.each(['express', 'fastify'] as const)('@tollgate/nestjs on platform-%s', (platform) => {
  it('sends the bytes @tollgate/express sends for the same limiter: app-wide and per route, 200s and the 429', async () => {
    const options = { limit: 3, window: '60s', algorithm: 'gcra' } as const
    const extra = { legacyHeaders: true }
    const expressUrl = await expressApp((app) => {
      app.use(rateLimit({ limiter: limiter(options), ...extra }))
      app.get('/hello', (_req, res) => {
        res.json({ ok: true })
      })
    })
    const nestUrl = await nestApp(
      platform,
      appModule({ limiter: limiter(options), ...extra }, [HelloController]),
    )
    const fromExpress = await sequence(expressUrl, '/hello', 4)
    const fromNest = await sequence(nestUrl, '/hello', 4)
    for (let i = 0; i < 4; i++) {
      const nest = at(fromNest, i)
      const plain = at(fromExpress, i)
      expect(nest.headers).toEqual(plain.headers)
      expect(nest.status).toBe(plain.status)
      expect(nest.body).toEqual(plain.body)
      expect(Math.abs(nest.reset - plain.reset)).toBeLessThanOrEqual(1)
    }
    expect(at(fromNest, 3).status).toBe(429)
    expect(at(fromNest, 3).headers['content-type']).toBe('application/problem+json; charset=utf-8')

    // Route level: the key carries the route template, as Express's route middleware does.
    const routeExpress = await expressApp((app) => {
      app.get('/users/:id', rateLimit({ limiter: limiter(options) }), (_req, res) => {
        res.json({ ok: true })
      })
    })
    const api = limiter(options)
    @Controller('users')
    class UsersController {
      @Get(':id')
      @RateLimit({ limiter: api })
      user() {
        return { ok: true }
      }
    }
    const routeNest = await nestApp(platform, appModule(undefined, [UsersController]))
    const a = await sequence(routeExpress, '/users/1', 4)
    const b = await sequence(routeNest, '/users/1', 4)
    expect(b.map((r) => [r.status, r.headers, r.body])).toEqual(a.map((r) => [r.status, r.headers, r.body]))
  })

  it('the decision is on req.rateLimit in the handler', async () => {
    const url = await nestApp(
      platform,
      appModule({ limiter: limiter({ limit: 5, window: '1d' }) }, [HelloController]),
    )
    expect((await request(url, '/hello')).json()).toEqual({ remaining: 4 })
  })

  it("controller-level @RateLimit: each route its own budget; a handler's own options replace it; @SkipRateLimit exempts", async () => {
    const three = limiter({ limit: 3, window: '1d' })
    const one = limiter({ limit: 1, window: '1d' })
    @Controller()
    @RateLimit({ limiter: three })
    class ItemsController {
      @Get('a')
      a() {
        return 'a'
      }
      @Get('b')
      b() {
        return 'b'
      }
      @Get('c')
      @RateLimit({ limiter: one })
      c() {
        return 'c'
      }
      @Get('health')
      @SkipRateLimit()
      health() {
        return 'ok'
      }
    }
    @Controller('open')
    @SkipRateLimit()
    class OpenController {
      @Get()
      get() {
        return 'open'
      }
    }
    const wide = limiter({ limit: 100, window: '1d' })
    const url = await nestApp(platform, appModule({ limiter: wide }, [ItemsController, OpenController]))
    const statuses = async (path: string, n: number) => {
      const out: number[] = []
      for (let i = 0; i < n; i++) out.push((await request(url, path)).status)
      return out
    }
    expect(await statuses('/a', 4)).toEqual([200, 200, 200, 429])
    expect(await statuses('/b', 4)).toEqual([200, 200, 200, 429])
    expect(await statuses('/c', 2)).toEqual([200, 429])
    const health = await request(url, '/health')
    expect(health.status).toBe(200)
    expect(health.headers.ratelimit).toBeUndefined()
    const opened = await request(url, '/open')
    expect(opened.status).toBe(200)
    expect(opened.headers.ratelimit).toBeUndefined()
  })

  it('@UseGuards(TollgateGuard) limits that controller only; forRootAsync takes its options from a provider', async () => {
    const api = limiter({ limit: 1, window: '1d' })
    @UseGuards(TollgateGuard)
    @Controller('guarded')
    class GuardedController {
      @Get()
      get() {
        return 'guarded'
      }
    }
    @Controller('free')
    class FreeController {
      @Get()
      get() {
        return 'free'
      }
    }
    @Module({ providers: [{ provide: 'API_LIMITER', useValue: api }], exports: ['API_LIMITER'] })
    class LimitersModule {}
    @Module({
      imports: [
        TollgateModule.forRootAsync({
          imports: [LimitersModule],
          inject: ['API_LIMITER'],
          useFactory: async (limiter: RateLimiter) => ({ limiter }),
        }),
      ],
      controllers: [GuardedController, FreeController],
    })
    class AppModule {}
    const url = await nestApp(platform, AppModule)
    expect((await request(url, '/guarded')).status).toBe(200)
    expect((await request(url, '/guarded')).status).toBe(429)
    for (let i = 0; i < 3; i++) expect((await request(url, '/free')).status).toBe(200)
  })

  it('an exception filter for RateLimitException answers refusals its way; the headers stay', async () => {
    @Catch(RateLimitException)
    class LimitedFilter implements ExceptionFilter {
      catch(error: RateLimitException, host: ArgumentsHost) {
        const res = host.switchToHttp().getResponse()
        const body = JSON.stringify({ error: 'slow down', retryInMs: error.decision?.retryAfterMs })
        const status = error.getStatus()
        if (platform === 'fastify') res.code(status).type('application/json').send(body)
        else res.status(status).type('application/json').send(body)
      }
    }
    @Module({
      imports: [TollgateModule.forRoot({ limiter: limiter({ limit: 1, window: '1d' }) })],
      controllers: [HelloController],
      providers: [
        { provide: APP_GUARD, useClass: TollgateGuard },
        { provide: APP_FILTER, useClass: LimitedFilter },
      ],
    })
    class AppModule {}
    const url = await nestApp(platform, AppModule)
    await request(url, '/hello')
    const refused = await request(url, '/hello')
    expect(refused.status).toBe(429)
    expect(refused.json()).toMatchObject({ error: 'slow down' })
    expect(refused.json().retryInMs).toBeGreaterThan(0)
    expect(refused.headers.ratelimit).toMatch(/^"default";r=0;t=\d+/)
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0)
  })

  it('penalties: a policy with a penalty keeps a client refused for the block', async () => {
    @Controller()
    class LoginController {
      @Get('login')
      @RateLimit({ limiter: limiter({ limit: 2, window: '1d', penalty: { after: 1, block: '2d' } }) })
      login() {
        return 'ok'
      }
    }
    const url = await nestApp(platform, appModule(undefined, [LoginController]))
    const seen: number[] = []
    for (let i = 0; i < 3; i++) seen.push((await request(url, '/login')).status)
    expect(seen).toEqual([200, 200, 429])
    // Blocked for two days: longer than the window itself.
    expect(Number((await request(url, '/login')).headers['retry-after'])).toBeGreaterThan(86_400)
  })

  it('an injected service is still available to a guarded controller (the guard does not disturb DI)', async () => {
    @Controller()
    class ServiceController {
      constructor(@Inject('GREETING') private readonly greeting: string) {}
      @Get('hello')
      hello() {
        return this.greeting
      }
    }
    @Module({
      imports: [TollgateModule.forRoot({ limiter: limiter({ limit: 5, window: '1d' }) })],
      controllers: [ServiceController],
      providers: [
        { provide: APP_GUARD, useClass: TollgateGuard },
        { provide: 'GREETING', useValue: 'hi' },
      ],
    })
    class AppModule {}
    const url = await nestApp(platform, AppModule)
    const res = await request(url, '/hello')
    expect(res.text).toBe('hi')
    expect(res.headers.ratelimit).toMatch(/^"default";r=4;/)
  })
})

describe('configuration errors', () => {
  it('@RateLimit() checks its options as the class is defined', () => {
    expect(() => RateLimit({ limiter: limiter({ limit: 1, window: '1d' }), cost: -1 })).toThrow(ConfigError)
    expect(() => RateLimit({ limiter: limiter({ limit: 1, window: '1d' }), windowMs: 1 } as never)).toThrow(
      expect.objectContaining({ option: 'windowMs' }),
    )
  })

  it('TollgateModule.forRoot() checks its options at once; forRootAsync when the app initialises', async () => {
    expect(() => TollgateModule.forRoot({} as never)).toThrow(expect.objectContaining({ option: 'limiter' }))
    @Module({ imports: [TollgateModule.forRootAsync({ useFactory: () => ({ limiter: 'api' }) as never })] })
    class AppModule {}
    const built = NestFactory.create(AppModule, new ExpressAdapter(), { logger: false, abortOnError: false })
    await expect(built.then((app) => app.init())).rejects.toMatchObject({ code: 'ERR_TOLLGATE_CONFIG' })
    await built.then((app) => app.close()).catch(() => undefined)
  })
})
