/**
 * `decision.binding`: the limiter picks the binding pair once and every decision source carries it
 * (store, deny cache, failure policy, shadow), on MemoryStore and RedisStore alike. Day-long windows:
 * no window boundary falls inside a test.
 */

import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { nodeRedis } from '../../test/clients'
import { MemoryStore, RateLimiter, RedisStore, type Store, StoreError } from '../index'

let client: Awaited<ReturnType<typeof nodeRedis>>
beforeAll(async () => {
  client = await nodeRedis()
})
afterAll(async () => {
  await client.quit()
})

const stores: [string, () => Store][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore(client)],
]

describe.each(stores)('%s', (_name, makeStore) => {
  it('names the binding pair on store, peek and deny-cache decisions', async () => {
    const limiter = new RateLimiter({
      store: makeStore(),
      prefix: uniquePrefix('binding'),
      policies: { daily: { limit: 5, window: '1d' }, burst: { limit: 2, window: '1d' } },
    })
    const first = await limiter.consume('k')
    expect(first.source).toBe('store')
    expect(first.binding).toBe(1) // burst: 1 left, daily 4
    expect(first.limit).toBe(first.policies[first.binding]!.limit)
    expect((await limiter.peek('k')).binding).toBe(1)
    await limiter.consume('k')
    const refused = await limiter.consume('k')
    expect(refused.allowed).toBe(false)
    expect(refused.binding).toBe(1)
    const cached = await limiter.consume('k')
    expect(cached.source).toBe('cache')
    expect(cached.binding).toBe(1)
    expect(cached.policies[cached.binding]!.policy).toBe('burst')
  })

  it('a mixed shadow call names the enforced pair it charged, at its index in the whole call', async () => {
    const limiter = new RateLimiter({
      store: makeStore(),
      prefix: uniquePrefix('binding'),
      policies: { burst: { limit: 1, window: '1d', shadow: true }, daily: { limit: 5, window: '1d' } },
    })
    await limiter.consume('k')
    const second = await limiter.consume('k') // burst (shadow) refuses; daily alone is charged
    expect(second.shadow).toEqual(['burst'])
    expect(second.binding).toBe(1)
    expect(second.policies[second.binding]!.policy).toBe('daily')
    expect(second.limit).toBe(5)
    expect(second.remaining).toBe(3)
  })

  it('when an enforced pair and a shadow one both refuse, the answer is the enforced one, whatever the shadow waits', async () => {
    const limiter = new RateLimiter({
      store: makeStore(),
      prefix: uniquePrefix('binding'),
      policies: {
        weekly: { limit: 1, window: '7d', algorithm: 'gcra', shadow: true }, // waits ~7 days once spent
        daily: { limit: 2, window: '1d', algorithm: 'gcra' }, // waits ~12 hours once spent
      },
    })
    await limiter.consume('k')
    expect((await limiter.consume('k')).allowed).toBe(true) // weekly (shadow) refuses, daily admits
    const refused = await limiter.consume('k')
    expect([refused.allowed, refused.shadow]).toEqual([false, ['weekly']])
    expect(refused.policies.map((p) => p.allowed)).toEqual([false, false])
    expect(refused.binding).toBe(1)
    expect([refused.limit, refused.remaining]).toEqual([2, 0])
    expect(refused.retryAfterMs).toBe(refused.policies[1]!.retryAfterMs)
    expect(refused.retryAfterMs).toBeLessThanOrEqual(12 * 3_600_000)
    expect(refused.policies[0]!.retryAfterMs).toBeGreaterThan(6 * 86_400_000)
    const cached = await limiter.consume('k') // the deny cache holds the enforced wait, not the shadow one
    expect([cached.source, cached.allowed, cached.binding, cached.shadow]).toEqual([
      'cache',
      false,
      1,
      ['weekly'],
    ])
    expect(cached.retryAfterMs).toBeLessThanOrEqual(refused.retryAfterMs)
  })
})

describe('failure-policy decisions', () => {
  const down: Store = {
    consume: () => Promise.reject(new StoreError('down')),
    peek: () => Promise.reject(new StoreError('down')),
    refund: () => Promise.reject(new StoreError('down')),
    reset: () => Promise.reject(new StoreError('down')),
  }
  const policies = { daily: { limit: 50, window: '1d' }, burst: { limit: 20, window: '1d' } } as const

  it("'local' names the binding pair of the in-process answer", async () => {
    const limiter = new RateLimiter({ store: down, policies, onStoreError: 'local', localShare: 0.1 })
    const d = await limiter.consume('k')
    expect(d.source).toBe('fallback')
    expect(d.binding).toBe(1)
    expect(d.limit).toBe(2)
  })

  it.each(['allow', 'deny'] as const)("'%s' has no pairs: binding -1", async (onStoreError) => {
    const limiter = new RateLimiter({ store: down, policies, onStoreError })
    const d = await limiter.consume('k')
    expect(d.policies).toEqual([])
    expect(d.binding).toBe(-1)
  })
})
