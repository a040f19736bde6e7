/**
 * Limiters for the adapters' `settle` tests, on the suite's Redis: each on a fresh prefix, with its
 * settlements watched so a test waits for them to land instead of for a while. Call at the top of a
 * test file: it registers the Redis client's hooks.
 * @module
 */
import { RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { redisUrl } from './env'

/** A limiter whose settlements can be awaited. */
export interface WatchedLimiter {
  limiter: RateLimiter
  /** Resolves once the next settlement not yet waited for has landed. */
  settled(): Promise<void>
  /** Resolves once `n` settlements in all were asked for and have landed. */
  landed(n: number): Promise<void>
}

/** Wraps `limiter.settle` so each settlement in flight is seen. */
function watch(limiter: RateLimiter): WatchedLimiter {
  const all: Promise<void>[] = []
  let next = 0
  let wake: (() => void) | undefined
  const settle = limiter.settle.bind(limiter)
  limiter.settle = (...args) => {
    const p = settle(...args)
    all.push(p)
    wake?.()
    return p
  }
  const asked = async (n: number) => {
    while (all.length < n) await new Promise<void>((resolve) => (wake = resolve))
  }
  return {
    limiter,
    settled: async () => {
      await asked(next + 1)
      await all[next++]
    },
    landed: async (n) => {
      await asked(n)
      await Promise.all(all)
    },
  }
}

/**
 * The settle tests' limiters for one adapter: `tokens()` is one gcra policy of `limit` a day, `perPolicy()`
 * a requests policy (fixed window, 1000) beside a tokens one (gcra, 100). No deny cache: every call
 * reaches Redis, so the counts read are the store's.
 */
export function settleLimiters(label: string) {
  let redis: ReturnType<typeof createClient> | undefined
  beforeAll(async () => {
    redis = createClient({ url: redisUrl() })
    await redis.connect()
  })
  afterAll(async () => {
    await redis?.quit()
  })
  let n = 0
  const make = (options: Omit<RateLimiterOptions, 'store' | 'prefix'>) => {
    if (!redis) throw new Error('the settle limiters connect in beforeAll')
    return watch(
      new RateLimiter({
        store: new RedisStore(redis),
        prefix: `${label}-settle-${process.pid}-${n++}`,
        denyCache: false,
        ...options,
      }),
    )
  }
  return {
    tokens: (limit = 100) => make({ limit, window: '1d', algorithm: 'gcra' }),
    perPolicy: () =>
      make({
        policies: {
          requests: { limit: 1000, window: '1d', algorithm: 'fixed-window' },
          tokens: { limit: 100, window: '1d', algorithm: 'gcra' },
        },
      }),
  }
}

/** The `r=` of a RateLimit field value: the named policy's, or the first one's. */
export function remainingIn(field: string | string[] | null | undefined, policy?: string): number {
  const pattern = policy === undefined ? /r=(\d+)/ : new RegExp(`"${policy}";r=(\\d+)`)
  const found = pattern.exec(String(field ?? ''))
  if (!found) throw new Error(`no r= ${policy ?? ''} in ${String(field)}`)
  return Number(found[1])
}
