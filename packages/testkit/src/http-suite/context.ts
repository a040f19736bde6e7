/**
 * What every part of the suite shares: one node-redis client per adapter run, a fresh prefix per
 * limiter (tests never see each other's state), and the apps a test started, closed after it.
 */
import { RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { redisUrl } from '../env'
import { request } from './request'
import type { AppFactory, AppSpec, RunningApp, SuiteResponse } from './types'

/** The fixture each part of the suite describes its cases with. */
export interface SuiteContext {
  /** The adapter's factory, for cases that expect it to reject. */
  readonly factory: AppFactory
  /** The shared store (set once the suite's `beforeAll` has run). */
  readonly store: RedisStore
  /** A limiter on the shared store with a fresh prefix. */
  limiter(options: Omit<RateLimiterOptions, 'store' | 'prefix'>): RateLimiter
  /** Builds an app; it is closed after the test. */
  start(spec: AppSpec): Promise<RunningApp>
  get(app: RunningApp, path: string, headers?: Record<string, string>): Promise<SuiteResponse>
  /** The statuses of `n` GETs, sent one after another. */
  statuses(app: RunningApp, n: number, path: string, headers?: Record<string, string>): Promise<number[]>
}

let prefixCounter = 0
/** A prefix no other test (or run) uses. */
export function freshPrefix(): string {
  return `http-suite-${process.pid}-${Date.now().toString(36)}-${++prefixCounter}`
}

/** What a client of a Redis that is down answers every call with. */
export function fail(): Promise<never> {
  return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1'))
}

/** Registers the suite's hooks (in the calling `describe`) and returns its fixture. */
export function suiteContext(factory: AppFactory): SuiteContext {
  let redis: ReturnType<typeof createClient> | undefined
  let store: RedisStore | undefined
  const open: RunningApp[] = []

  beforeAll(async () => {
    redis = createClient({ url: redisUrl() })
    redis.on('error', () => undefined)
    await redis.connect()
    store = new RedisStore(redis)
  })
  afterEach(async () => {
    await Promise.all(open.splice(0).map((app) => app.close()))
  })
  afterAll(async () => {
    await redis?.quit()
  })

  const get = (app: RunningApp, path: string, headers?: Record<string, string>) =>
    request(app.url, path, { headers })
  const context: SuiteContext = {
    factory,
    get store() {
      if (!store) throw new Error('the suite store is set in beforeAll')
      return store
    },
    limiter(options) {
      return new RateLimiter({ store: context.store, prefix: freshPrefix(), ...options })
    },
    async start(spec) {
      const app = await factory(spec)
      open.push(app)
      return app
    },
    get,
    async statuses(app, n, path, headers) {
      const out: number[] = []
      for (let i = 0; i < n; i++) out.push((await get(app, path, headers)).status)
      return out
    },
  }
  return context
}
