/**
 * What the in-process Hono tests share: a Redis client on the suite's redis-server (its hooks registered
 * by {@link honoTestbed}), limiters on fresh prefixes, and a fake `getConnInfo`: `app.request()` has no
 * socket, so the "socket address" is whatever the test puts in a test-only header.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import type { Context, Hono } from 'hono'
import { createClient } from 'redis'
import type { GetClientAddress } from '../src'

type Client = ReturnType<typeof createClient>

/** Registers the Redis client's hooks; call at the top of a test file. */
export function honoTestbed() {
  let redis: Client | undefined
  let store: RedisStore | undefined
  beforeAll(async () => {
    redis = createClient({ url: redisUrl() })
    redis.on('error', () => {})
    await redis.connect()
    store = new RedisStore(redis)
  })
  afterAll(async () => {
    await redis?.quit()
  })
  const connected = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the testbed connects in beforeAll')
    return value
  }
  return {
    redis: () => connected(redis),
    store: () => connected(store),
    limiter: (limit = 3, extra: object = {}) =>
      new RateLimiter({
        store: connected(store),
        prefix: uniquePrefix('hono'),
        limit,
        window: '1m',
        ...extra,
      }),
  }
}

export const TEST_IP = 'x-test-socket'
/** The "socket address" is whatever the test puts in a test-only header. */
export const fakeConnInfo: GetClientAddress = (c) => ({ remote: { address: c.req.header(TEST_IP) } })
export const from = (ip: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { [TEST_IP]: ip, ...(init.headers as Record<string, string> | undefined) },
})
/** The identity the first policy of the decision was applied to (the key the middleware built). */
export const identity = (c: Context): string | undefined => c.get('rateLimit')?.policies[0]?.key
export const statuses = async (
  app: Hono<any>,
  path: string,
  n: number,
  init: RequestInit,
): Promise<number[]> => {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await app.request(path, init)).status)
  return out
}
