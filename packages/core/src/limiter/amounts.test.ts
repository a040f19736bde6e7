/**
 * A cost per policy (`consume(key, { cost: { tokens: n } })`): one call limits requests and tokens, each
 * policy checked with and charged its own cost atomically; refunds and settlements give back (or charge)
 * what each policy was charged. Real Redis (one call per script, and batched) and the MemoryStore, day-long
 * windows so no boundary falls inside a test.
 */
import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import { nodeRedisFixture } from '../../test/clients'
import { type Algorithm, InputError, MemoryStore, RateLimiter, type Store } from '../index'

describe.each([
  ['MemoryStore', async () => ({ store: new MemoryStore() as Store, close: async () => {} })],
  ['RedisStore, one script per call', () => nodeRedisFixture(3, { batch: false })],
  ['RedisStore, batched', () => nodeRedisFixture(3)],
])('a cost per policy: %s', (_name, make) => {
  let fx: { store: Store; close(): Promise<void> }
  beforeAll(async () => {
    fx = await make()
  })
  afterAll(async () => {
    await fx?.close()
  })

  const ai = (tokens: Algorithm, requests: Algorithm = 'fixed-window', limits = [5, 100]) =>
    new RateLimiter({
      store: fx.store,
      prefix: uniquePrefix('costs'),
      denyCache: false,
      policies: {
        requests: { limit: limits[0]!, window: '1d', algorithm: requests },
        tokens: { limit: limits[1]!, window: '1d', algorithm: tokens },
      },
    })
  const remaining = async (l: RateLimiter, key = 'k') =>
    (await l.peek(key, { cost: 0 })).policies.map((p) => p.remaining)

  it.each(ALL_ALGORITHMS)('tokens on %s: each policy is charged its own cost, or none is', async (alg) => {
    const l = ai(alg, alg === 'fixed-window' ? 'gcra' : 'fixed-window')
    const d = await l.consume('k', { cost: { tokens: 30 } })
    expect(d).toMatchObject({ allowed: true, cost: 30 })
    expect(d.policies.map((p) => p.remaining)).toEqual([4, 70])
    for (let i = 0; i < 2; i++) expect((await l.consume('k', { cost: { tokens: 30 } })).allowed).toBe(true)
    const refused = await l.consume('k', { cost: { tokens: 30 } })
    expect(refused.allowed).toBe(false)
    expect(refused.policies.map((p) => p.allowed)).toEqual([true, false])
    // the refusal charged nothing, requests included; a smaller cost still fits
    expect(await remaining(l)).toEqual([2, 10])
    expect((await l.consume('k', { cost: { tokens: 10 } })).allowed).toBe(true)
    expect(await remaining(l)).toEqual([1, 0])
    // a peek checks each policy with its own cost too
    const p = await l.peek('k', { cost: { requests: 1, tokens: 0 } })
    expect(p.allowed).toBe(true)
    expect((await l.peek('k', { cost: { tokens: 1 } })).allowed).toBe(false)
  })

  it('requests refuses on its own: a record with tokens 0 still charges requests 1', async () => {
    const l = ai('sliding-window', 'sliding-log', [2, 100])
    expect((await l.consume('k', { cost: { tokens: 0 } })).allowed).toBe(true)
    expect((await l.consume('k', { cost: { requests: 1 } })).allowed).toBe(true)
    const third = await l.consume('k', { cost: { tokens: 5 } })
    expect(third.policies.map((p) => p.allowed)).toEqual([false, true])
    expect(await remaining(l)).toEqual([0, 99])
  })

  it('settle by record: the named policy becomes its value, the others keep their charge, once', async () => {
    const l = ai('token-bucket', 'sliding-window')
    const d = await l.consume('k', { cost: { tokens: 50 } })
    await l.settle(d, { tokens: 80 })
    expect(await remaining(l)).toEqual([4, 20])
    await l.settle(d, { tokens: 10 }) // settled already: no more
    await l.refund(d) // nor a refund after it
    expect(await remaining(l)).toEqual([4, 20])
    // a number settles every policy: requests 1 -> 3, tokens 5 -> 3
    const e = await l.consume('k', { cost: { tokens: 5 } })
    await l.settle(e, 3)
    expect(await remaining(l)).toEqual([1, 17])
    // an overdraft past the limit refuses until it drains
    const f = await l.consume('k', { cost: { tokens: 10 } })
    await l.settle(f, { tokens: 40 })
    expect((await l.consume('k', { cost: { tokens: 1 } })).policies[1]!.allowed).toBe(false)
  })

  it('refunds give back what each policy was charged; by record, at most its charge', async () => {
    const l = ai('gcra', 'fixed-window')
    const d = await l.consume('k', { cost: { tokens: 40 } })
    await l.refund(d, { cost: { tokens: 15 } })
    expect(await remaining(l)).toEqual([4, 75])
    await expect(l.refund(d, { cost: { tokens: 41 } })).rejects.toThrow(InputError)
    await expect(l.refund(d, { cost: 2 })).rejects.toThrow(InputError) // requests was charged 1
    await l.refund(d, { cost: { tokens: 30 } }) // only the 25 left of this spend come back
    expect(await remaining(l)).toEqual([4, 100])
    await l.refund(d) // requests' 1, tokens' nothing more
    expect(await remaining(l)).toEqual([5, 100])
    const e = await l.consume('k', { cost: { requests: 2, tokens: 7 } })
    await l.refund(e)
    await l.refund(e)
    expect(await remaining(l)).toEqual([5, 100])
  })

  it('bad records are InputErrors before the store', async () => {
    const l = ai('fixed-window')
    const calls = [
      () => l.consume('k', { cost: { nope: 1 } }),
      () => l.consume('k', { cost: { tokens: -1 } }),
      () => l.consume('k', { cost: { tokens: 1.5 } }),
      () => l.peek('k', { cost: { tokens: Number.NaN } }),
      () => l.consume('k', { cost: [1, 2] as never }),
    ]
    for (const call of calls) await expect(call()).rejects.toThrow(InputError)
    await expect(l.consume('k', { cost: { nope: 1 } })).rejects.toThrow(/cost\.nope/)
    const d = await l.consume('k')
    await expect(l.settle(d, { nope: 3 })).rejects.toThrow(/actualCost\.nope/)
    await expect(l.settle(d, { tokens: -3 })).rejects.toThrow(InputError)
    expect(await remaining(l)).toEqual([4, 99])
  })

  it('penalties: a refusal by the tokens policy counts toward its block, requests is not charged', async () => {
    const l = new RateLimiter({
      store: fx.store,
      prefix: uniquePrefix('costs-pen'),
      denyCache: false,
      policies: {
        requests: { limit: 10, window: '1d', algorithm: 'fixed-window' },
        tokens: { limit: 100, window: '1d', algorithm: 'gcra', penalty: { after: 2, block: '1h' } },
      },
    })
    expect((await l.consume('k', { cost: { tokens: 90 } })).allowed).toBe(true)
    const refusals = await Promise.all([
      l.consume('k', { cost: { tokens: 50 } }),
      l.consume('k', { cost: { tokens: 50 } }),
    ])
    expect(refusals.map((d) => d.allowed)).toEqual([false, false])
    const blocked = await l.consume('k', { cost: { tokens: 1 } })
    expect(blocked.policies[1]).toMatchObject({ allowed: false, blocked: true })
    expect((await l.peek('k', { cost: 0 })).policies[0]!.remaining).toBe(9)
  })

  it('concurrent clients: each policy admits exactly its budget (batched calls and settlements)', async () => {
    const l = ai('sliding-window', 'fixed-window', [12, 100])
    // tokens binds: 100 / 7 = 14 calls would fit it, requests 12 first
    const first = await Promise.all(Array.from({ length: 30 }, () => l.consume('k', { cost: { tokens: 7 } })))
    expect(first.filter((d) => d.allowed)).toHaveLength(12)
    expect(await remaining(l)).toEqual([0, 16])
    // each admitted call settles at 3 tokens, all at once: 12 x 4 come back
    await Promise.all(first.filter((d) => d.allowed).map((d) => l.settle(d, { tokens: 3 })))
    expect(await remaining(l)).toEqual([0, 64])
    const m = ai('fixed-window', 'sliding-log', [100, 50])
    const second = await Promise.all(
      Array.from({ length: 30 }, () => m.consume('k', { cost: { tokens: 7 } })),
    )
    expect(second.filter((d) => d.allowed)).toHaveLength(7)
    expect(await remaining(m)).toEqual([93, 1])
    await Promise.all(second.filter((d) => d.allowed).map((d) => m.refund(d)))
    expect(await remaining(m)).toEqual([100, 50])
  })
})

describe('a cost per policy and the deny cache', () => {
  it('a refusal under a large cost is not served to a smaller one', async () => {
    const l = new RateLimiter({
      store: new MemoryStore(),
      prefix: uniquePrefix('costs-cache'),
      policies: {
        requests: { limit: 10, window: '1d', algorithm: 'fixed-window' },
        tokens: { limit: 100, window: '1d', algorithm: 'fixed-window' },
      },
    })
    expect((await l.consume('k', { cost: { tokens: 90 } })).allowed).toBe(true)
    expect((await l.consume('k', { cost: { tokens: 50 } })).allowed).toBe(false)
    const cached = await l.consume('k', { cost: { tokens: 60 } })
    expect(cached).toMatchObject({ allowed: false, source: 'cache' })
    // requests 2 is more on one pair, tokens 5 less on another: the cache cannot say
    const small = await l.consume('k', { cost: { requests: 2, tokens: 5 } })
    expect(small).toMatchObject({ allowed: true, source: 'store' })
  })
})
