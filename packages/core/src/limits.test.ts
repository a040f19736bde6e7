/**
 * Per-call limits (`consume(key, { limits })`) against real Redis and the MemoryStore: the limit is data
 * sent with the one script call, validated per call (a bad value is refused before Redis), refunds are
 * made under the limit spent under.
 */

import { at } from '@tollgate/testkit/checked'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { nodeRedisFixture } from '../test/clients'
import { InputError, MemoryStore, RateLimiter, type Store } from './index'

describe.each([
  ['MemoryStore', async () => ({ store: new MemoryStore() as Store, close: async () => {} })],
  ['RedisStore (node-redis)', () => nodeRedisFixture(3)],
])('per-call limits: %s', (_name, make) => {
  let fx: { store: Store; close(): Promise<void>; exists?(key: string): Promise<boolean> }
  beforeAll(async () => {
    fx = await make()
  })
  afterAll(async () => {
    await fx?.close()
  })

  it.each(['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra'] as const)(
    '%s: one limiter, a limit per tenant, each exact',
    async (algorithm) => {
      const api = new RateLimiter({
        store: fx.store,
        prefix: uniquePrefix('plans'),
        limit: 100,
        window: '1d',
        algorithm,
      })
      const run = async (key: string, limits: number, n: number) => {
        const out: boolean[] = []
        for (let i = 0; i < n; i++) out.push((await api.consume(key, { limits })).allowed)
        return out
      }
      expect(await run('free', 2, 3)).toEqual([true, true, false])
      expect(await run('pro', 4, 5)).toEqual([true, true, true, true, false])
      const d = await api.consume('free', { limits: 2 })
      expect(d).toMatchObject({ allowed: false, limit: 2, remaining: 0 })
      expect(at(d.policies, 0).limit).toBe(2)
      // the configured limit still applies without the option
      expect((await api.consume('other')).limit).toBe(100)
    },
  )

  it('limits by policy name; unnamed policies keep theirs; refunds are made under the limit spent', async () => {
    const quota = new RateLimiter({
      store: fx.store,
      prefix: uniquePrefix('quota'),
      policies: {
        burst: { limit: 10, window: '1h', algorithm: 'gcra' },
        daily: { limit: 1000, window: '1d', algorithm: 'fixed-window' },
      },
    })
    const limits = { daily: 3 }
    const a = await quota.consume('t1', { limits })
    expect(a.policies.map((p) => [p.policy, p.limit, p.remaining])).toEqual([
      ['burst', 10, 9],
      ['daily', 3, 2],
    ])
    await quota.refund(a)
    const p = await quota.peek('t1', { limits })
    expect(p.policies.map((x) => x.remaining)).toEqual([10, 3])
    for (let i = 0; i < 3; i++) expect((await quota.consume('t1', { limits })).allowed).toBe(true)
    const refused = await quota.consume('t1', { limits })
    expect(refused).toMatchObject({ allowed: false, limit: 3 })
    expect(at(refused.policies, 1).allowed).toBe(false)
  })

  it('a bad limit is an InputError before Redis: never admitted, never the configured limit', async () => {
    const prefix = uniquePrefix('bad')
    const one = new RateLimiter({ store: fx.store, prefix, limit: 5, window: '1d', algorithm: 'sliding-log' })
    const two = new RateLimiter({
      store: fx.store,
      prefix: uniquePrefix('bad2'),
      policies: { a: { limit: 5, window: '1m' }, b: { limit: 5, window: '1m' } },
    })
    const bad: Array<[RateLimiter, unknown, string]> = [
      [one, 0, 'limits'],
      [one, -1, 'limits'],
      [one, 1.5, 'limits'],
      [one, Number.NaN, 'limits'],
      [one, Number.POSITIVE_INFINITY, 'limits'],
      [one, '5', 'limits'],
      [one, null, 'limits'],
      [one, 10_001, 'limits'], // sliding-log keeps one member per unit: at most 10,000
      [one, { nope: 3 }, 'limits.nope'],
      [one, { default: -3 }, 'limits.default'],
      [two, 3, 'limits'],
      [two, { a: 2, b: '2' }, 'limits.b'],
    ]
    for (const [limiter, limits, argument] of bad) {
      await expect(limiter.consume('k', { limits: limits as never })).rejects.toMatchObject({
        code: 'ERR_TOLLGATE_INPUT',
        argument,
      })
      await expect(limiter.peek('k', { limits: limits as never })).rejects.toBeInstanceOf(InputError)
    }
    if (fx.exists) expect(await fx.exists(at(one.keysFor('k'), 0))).toBe(false)
  })
})
