/**
 * Distinct limiters never share state by accident. Two processes (two clients of one Redis, a RedisStore
 * on each) with the default prefix, a strict 3/1h limiter and a loose 100/1m one, alternating calls on one
 * identity: each keeps its own count, for every pair of algorithms and for named policies of one name.
 * In one process, the same two limiters on one store are refused at construction.
 */

import { clearOfBoundary } from '@tollgate/testkit'
import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import {
  type Algorithm,
  ConfigError,
  MemoryStore,
  RateLimiter,
  type RateLimiterOptions,
  RedisStore,
} from '../src'
import { nodeRedis } from './clients'

const HOUR = 3_600_000

// Fresh clients for each test: limiters of an earlier test may still be registered on a client.
let client: Awaited<ReturnType<typeof nodeRedis>>
/** The other process's client. */
let other: Awaited<ReturnType<typeof nodeRedis>>
beforeEach(async () => {
  client = await nodeRedis()
  other = await nodeRedis()
})
afterEach(async () => {
  await client.quit()
  await other.quit()
})
// The strict limiter's hour must not end inside a test (a fixed window rightly starts afresh there).
beforeEach(() => clearOfBoundary(HOUR, 10_000))

/** Alternates 8 calls of each on one identity; returns how many each admitted. */
async function alternate(
  strict: RateLimiter,
  loose: RateLimiter,
  identity: string,
): Promise<[number, number]> {
  let s = 0
  let l = 0
  for (let i = 0; i < 8; i++) {
    if ((await strict.consume(identity)).allowed) s++
    if ((await loose.consume(identity)).allowed) l++
  }
  return [s, l]
}

const pairs = ALL_ALGORITHMS.flatMap((a) => ALL_ALGORITHMS.map((b) => [a, b] as [Algorithm, Algorithm]))

describe('two processes, default prefix, one identity', () => {
  it.each(pairs)('%s 3/1h and %s 100/1m keep their own counts', async (a, b) => {
    // a fresh identity: the default prefix is shared with every other test on this Redis
    const identity = uniquePrefix(`${a}-${b}`)
    const strict = new RateLimiter({ store: new RedisStore(client), limit: 3, window: '1h', algorithm: a })
    const loose = new RateLimiter({ store: new RedisStore(other), limit: 100, window: '1m', algorithm: b })
    expect(await alternate(strict, loose, identity)).toEqual([3, 8])
  })

  it.each(ALL_ALGORITHMS)(
    '%s: named policies of one name and two windows keep their own counts',
    async (alg) => {
      const identity = uniquePrefix(`named-${alg}`)
      const strict = new RateLimiter({
        store: new RedisStore(client),
        policies: { api: { limit: 3, window: '1h', algorithm: alg } },
      })
      const loose = new RateLimiter({
        store: new RedisStore(other),
        policies: { api: { limit: 100, window: '1m', algorithm: alg } },
      })
      expect(await alternate(strict, loose, identity)).toEqual([3, 8])
    },
  )

  it('a single-policy limiter and a named policy of the same numbers keep their own counts', async () => {
    const identity = uniquePrefix('single-named')
    const strict = new RateLimiter({ store: new RedisStore(client), limit: 3, window: '1h' })
    const named = new RateLimiter({
      store: new RedisStore(other),
      policies: { default: { limit: 3, window: '1h' } },
    })
    expect(await alternate(strict, named, identity)).toEqual([3, 3])
  })
})

describe('one process, one store, one prefix', () => {
  const build = (store: object, options: Omit<RateLimiterOptions, 'store'>) =>
    new RateLimiter({ ...options, store } as RateLimiterOptions)

  it.each([
    ['a redis store', () => new RedisStore(client)],
    ['a memory store', () => new MemoryStore()],
  ])('on %s: different policies are refused at construction, naming both limiters', (_name, makeStore) => {
    const store = makeStore()
    const first = build(store, { limit: 100, window: '1m' })
    let error: unknown
    try {
      build(store, { limit: 3, window: '1h' })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    const e = error as ConfigError
    expect(e.option).toBe('prefix')
    expect(e.received).toBe('tollgate')
    expect(e.message).toContain('"tollgate" (sliding-window 3/1h)')
    expect(e.message).toContain('"tollgate" (sliding-window 100/1m)')
    expect(e.message).toMatch(/own prefix/)
    expect(e.message).toMatch(/named policies/)
    expect(first.prefix).toBe('tollgate') // the first stays usable
  })

  it.each<[string, Omit<RateLimiterOptions, 'store'>, Omit<RateLimiterOptions, 'store'>]>([
    ['another algorithm', { limit: 3, window: '1h' }, { limit: 3, window: '1h', algorithm: 'fixed-window' }],
    ['another limit', { limit: 3, window: '1h' }, { limit: 4, window: '1h' }],
    [
      'another burst',
      { limit: 3, window: '1h', algorithm: 'gcra' },
      { limit: 3, window: '1h', algorithm: 'gcra', burst: 6 },
    ],
    ['another lease', { concurrency: 2, lease: '30s' } as never, { concurrency: 2, lease: '1m' } as never],
    ['a penalty', { limit: 3, window: '1h' }, { limit: 3, window: '1h', penalty: { block: '1m' } }],
    [
      'one policy more',
      { policies: { a: { limit: 3, window: '1h' } } },
      { policies: { a: { limit: 3, window: '1h' }, b: { limit: 9, window: '1d' } } },
    ],
    [
      'a named policy for the inline one',
      { limit: 3, window: '1h' },
      { policies: { default: { limit: 3, window: '1h' } } },
    ],
  ])('%s is refused', (_name, a, b) => {
    const store = new MemoryStore()
    build(store, { name: 'first', ...a })
    expect(() => build(store, { name: 'second', ...b })).toThrow(
      /limiter "second" \(.*\) and limiter "first"/,
    )
  })

  it('identical policies are allowed (the same limiter built twice shares state on purpose)', async () => {
    const store = new RedisStore(client)
    const identity = uniquePrefix('twice')
    const options = { limit: 3, window: '1h', algorithm: 'fixed-window' } as const
    const one = build(store, options)
    const two = build(store, { ...options, name: 'other-name', shadow: false })
    build(store, {
      policies: { b: { limit: 1, window: '1d' }, a: { limit: 2, window: '1h' } },
      prefix: uniquePrefix('x'),
    })
    let admitted = 0
    for (let i = 0; i < 4; i++) {
      if ((await one.consume(identity)).allowed) admitted++
      if ((await two.consume(identity)).allowed) admitted++
    }
    expect(admitted).toBe(3)
  })

  it('a prefix each, or a store each, is allowed', () => {
    const store = new MemoryStore()
    build(store, { limit: 100, window: '1m', prefix: 'minute' })
    build(store, { limit: 3, window: '1h', prefix: 'hour' })
    build(new MemoryStore(), { limit: 3, window: '1h', prefix: 'minute' })
  })
})
