/**
 * `TollgateThrottlerStorage` under `@nestjs/throttler`'s own guard, in real Nest apps on both platforms
 * against the spawned redis-server: exact limits, one budget across app instances, blocking, the failure
 * policy, and the storage's answers to the guard.
 */
import 'reflect-metadata'
import type { Server } from 'node:http'
import { Controller, Get, type INestApplication, Module } from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import {
  Throttle,
  ThrottlerGuard,
  ThrottlerModule,
  type ThrottlerModuleOptions,
  type ThrottlerStorage,
} from '@nestjs/throttler'
import { ConfigError, MemoryStore, RedisStore } from '@tollgate/core'
import { TEMPORARY_REDUCED_CAPACITY_TYPE } from '@tollgate/http'
import { at, type RedisClusterHandle, sleepAtLeast, startRedisCluster } from '@tollgate/testkit'
import { request } from '@tollgate/testkit/http-suite'
import { createClient, createCluster } from 'redis'
import type { Platform } from '../test/factory'
import { TollgateThrottlerStorage } from './index'

const DAY = 86_400_000
let counter = 0
const freshPrefix = () => `nest-throttler-${process.pid}-${++counter}`

@Controller()
class HelloController {
  @Get('hello')
  hello() {
    return { ok: true }
  }

  @Get('strict')
  @Throttle({ default: { limit: 2, ttl: DAY } })
  strict() {
    return { ok: true }
  }
}

const clients: Array<{ quit(): Promise<unknown> }> = []
const apps: INestApplication[] = []

/** A Redis store on a connection of its own, as each replica of an app has. */
async function replicaStore(): Promise<RedisStore> {
  const redis = createClient({ url: process.env.REDIS_URL })
  redis.on('error', () => undefined)
  await redis.connect()
  clients.push(redis)
  return new RedisStore(redis)
}

async function throttledApp(
  platform: Platform,
  options: ThrottlerModuleOptions,
): Promise<{ url: string; app: INestApplication }> {
  @Module({
    imports: [ThrottlerModule.forRoot(options)],
    controllers: [HelloController],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })
  class AppModule {}
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter()
  const app = await NestFactory.create(AppModule, adapter, { logger: false, abortOnError: false })
  await app.listen(0, '127.0.0.1')
  apps.push(app)
  const address = (app.getHttpServer() as Server).address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return { url: `http://127.0.0.1:${address.port}`, app }
}

afterEach(async () => {
  await Promise.all(
    apps.splice(0).map(async (app) => {
      const closing = app.close()
      ;(app.getHttpServer() as Server).closeAllConnections()
      await closing
    }),
  )
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit()))
})

async function statuses(url: string, path: string, n: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await request(url, path)).status)
  return out
}

/** Fires `n` requests at once, alternating between the apps. */
async function burst(urls: string[], path: string, n: number): Promise<number[]> {
  const all = Array.from({ length: n }, (_, i) => request(at(urls, i % urls.length), path))
  return (await Promise.all(all)).map((r) => r.status)
}

describe.each(['express', 'fastify'] as const)('TollgateThrottlerStorage on platform-%s', (platform) => {
  it('admits exactly the limit, then 429 with Retry-After; @Throttle() overrides per route', async () => {
    const storage = new TollgateThrottlerStorage(await replicaStore(), { prefix: freshPrefix() })
    const { url } = await throttledApp(platform, { throttlers: [{ limit: 5, ttl: DAY }], storage })
    const seen: string[] = []
    for (let i = 0; i < 5; i++) {
      const res = await request(url, '/hello')
      expect(res.status).toBe(200)
      seen.push(String(res.headers['x-ratelimit-remaining']))
    }
    expect(seen).toEqual(['4', '3', '2', '1', '0'])
    const refused = await request(url, '/hello')
    expect(refused.status).toBe(429)
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(3600)
    expect(await statuses(url, '/strict', 3)).toEqual([200, 200, 429])
  })

  it('two app instances on one Redis admit exactly the limit between them under a concurrent burst', async () => {
    const prefix = freshPrefix()
    const throttlers = [{ limit: 5, ttl: DAY }]
    const a = await throttledApp(platform, {
      throttlers,
      storage: new TollgateThrottlerStorage(await replicaStore(), { prefix }),
    })
    const b = await throttledApp(platform, {
      throttlers,
      storage: new TollgateThrottlerStorage(await replicaStore(), { prefix }),
    })
    const seen = await burst([a.url, b.url], '/hello', 50)
    expect(seen.filter((s) => s === 200)).toHaveLength(5)
    expect(seen.filter((s) => s === 429)).toHaveLength(45)
  })

  it("the control: @nestjs/throttler's in-memory storage admits the limit once per instance", async () => {
    const throttlers = [{ limit: 5, ttl: DAY }]
    const a = await throttledApp(platform, { throttlers })
    const b = await throttledApp(platform, { throttlers })
    const seen = await burst([a.url, b.url], '/hello', 50)
    expect(seen.filter((s) => s === 200)).toHaveLength(10)
  })

  it('blockDuration: a client past the limit stays refused after its hits expired, until the block ends', async () => {
    const storage = new TollgateThrottlerStorage(await replicaStore(), { prefix: freshPrefix() })
    const { url } = await throttledApp(platform, {
      throttlers: [{ limit: 1, ttl: 1000, blockDuration: DAY }],
      storage,
    })
    expect(await statuses(url, '/hello', 2)).toEqual([200, 429])
    await sleepAtLeast(1100) // the admitted hit has expired; the block has not
    const res = await request(url, '/hello')
    expect(res.status).toBe(429)
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(3600)
  })

  it('blockDuration 0: no block, a refused client is admitted again once its oldest hit expires', async () => {
    const storage = new TollgateThrottlerStorage(await replicaStore(), { prefix: freshPrefix() })
    const { url } = await throttledApp(platform, {
      throttlers: [{ limit: 1, ttl: 1000, blockDuration: 0 }],
      storage,
    })
    expect(await statuses(url, '/hello', 2)).toEqual([200, 429])
    await sleepAtLeast(1100)
    expect((await request(url, '/hello')).status).toBe(200)
  })

  it("store down: 'deny' answers 503 (not 429), 'allow' admits", async () => {
    const fail = () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1'))
    const down = () => new RedisStore({ evalsha: fail, eval: fail })
    const denied = await throttledApp(platform, {
      throttlers: [{ limit: 5, ttl: DAY }],
      storage: new TollgateThrottlerStorage(down(), { prefix: freshPrefix(), onStoreError: 'deny' }),
    })
    const res = await request(denied.url, '/hello')
    expect(res.status).toBe(503)
    expect(res.json()).toMatchObject({ status: 503, type: TEMPORARY_REDUCED_CAPACITY_TYPE })
    const allowed = await throttledApp(platform, {
      throttlers: [{ limit: 5, ttl: DAY }],
      storage: new TollgateThrottlerStorage(down(), { prefix: freshPrefix(), onStoreError: 'allow' }),
    })
    expect((await request(allowed.url, '/hello')).status).toBe(200)
  })
})

describe('TollgateThrottlerStorage.increment', () => {
  it("answers as @nestjs/throttler's storage does: hits, seconds to expiry, the block", async () => {
    const storage: ThrottlerStorage = new TollgateThrottlerStorage(await replicaStore(), {
      prefix: freshPrefix(),
    })
    const hits = []
    for (let i = 0; i < 3; i++) hits.push(await storage.increment('k', DAY, 3, DAY, 'default'))
    expect(hits.map((h) => h.totalHits)).toEqual([1, 2, 3])
    for (const h of hits) {
      expect(h.isBlocked).toBe(false)
      expect(h.timeToBlockExpire).toBe(0)
      expect(h.timeToExpire).toBeGreaterThan(0)
      expect(h.timeToExpire).toBeLessThanOrEqual(DAY / 1000)
    }
    const blocked = await storage.increment('k', DAY, 3, DAY, 'default')
    expect(blocked).toMatchObject({ totalHits: 4, isBlocked: true })
    expect(blocked.timeToBlockExpire).toBeGreaterThan(3600)
    expect(blocked.timeToBlockExpire).toBeLessThanOrEqual(DAY / 1000)
    // Another throttler name, and another key, count on their own.
    expect(await storage.increment('k', DAY, 3, DAY, 'burst')).toMatchObject({ totalHits: 1 })
    expect(await storage.increment('other', DAY, 3, DAY, 'default')).toMatchObject({ totalHits: 1 })
  })

  it('a limit that changes per call is the one applied (no limiter per value)', async () => {
    const storage = new TollgateThrottlerStorage(await replicaStore(), { prefix: freshPrefix() })
    expect((await storage.increment('k', DAY, 1, 0, 'default')).isBlocked).toBe(false)
    expect((await storage.increment('k', DAY, 1, 0, 'default')).isBlocked).toBe(true)
    expect(await storage.increment('k', DAY, 3, 0, 'default')).toMatchObject({
      totalHits: 2,
      isBlocked: false,
    })
  })

  it('bad options throw ConfigError at construction', () => {
    expect(() => new TollgateThrottlerStorage({} as never)).toThrow(ConfigError)
    expect(() => new TollgateThrottlerStorage(new MemoryStore(), { prefix: 'a{b}' })).toThrow(ConfigError)
    expect(() => new TollgateThrottlerStorage(new MemoryStore(), { algorithm: 'leaky' as never })).toThrow(
      expect.objectContaining({ option: 'algorithm' }),
    )
  })
})

describe('TollgateThrottlerStorage on a Redis Cluster (node-redis createCluster)', () => {
  let cluster: RedisClusterHandle
  let client: ReturnType<typeof createCluster>
  beforeAll(async () => {
    cluster = await startRedisCluster()
    client = createCluster({ rootNodes: cluster.rootNodes })
    client.on('error', () => undefined)
    await client.connect()
  }, 60_000)
  afterAll(async () => {
    await client?.quit()
    await cluster?.stop()
  })

  it('many trackers, with blocking: exact per key, no CROSSSLOT', async () => {
    const storage = new TollgateThrottlerStorage(new RedisStore(client), { prefix: freshPrefix() })
    const keys = Array.from({ length: 20 }, (_, i) => `tracker-${i}`)
    const calls = keys.flatMap((k) =>
      Array.from({ length: 4 }, () => storage.increment(k, DAY, 3, DAY, 'default')),
    )
    const records = await Promise.all(calls)
    expect(records.filter((r) => !r.isBlocked)).toHaveLength(3 * keys.length)
    expect(records.filter((r) => r.isBlocked)).toHaveLength(keys.length)
  })
})
