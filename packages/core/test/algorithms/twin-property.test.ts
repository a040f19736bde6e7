/**
 * The Lua and its TS twin give identical decisions for the same clock: random sequences of
 * consume / peek / refund / settle / sleep run against real Redis, and each step is replayed on a MemoryStore at
 * the exact microsecond Redis reported (the scripts return their TIME). No fake clock touches Lua.
 */

import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import fc from 'fast-check'
import { type Algorithm, MemoryStore, RateLimiter, RedisStore } from '../../src'
import type { StoreEntry, StoreReply } from '../../src/entries/scripts'
import { nodeRedis } from '../clients'

type Op =
  | { kind: 'consume' | 'peek'; cost: number }
  | { kind: 'refund'; cost: number }
  | { kind: 'settle'; actual: number }
  | { kind: 'sleep'; ms: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ kind: fc.constant('consume' as const), cost: fc.integer({ min: 0, max: 4 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('peek' as const), cost: fc.integer({ min: 0, max: 4 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('refund' as const), cost: fc.integer({ min: 1, max: 4 }) }),
  },
  {
    weight: 2,
    // up to well past any limit drawn below: overdrafts included
    arbitrary: fc.record({ kind: fc.constant('settle' as const), actual: fc.integer({ min: 0, max: 15 }) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('sleep' as const), ms: fc.integer({ min: 1, max: 40 }) }),
  },
)

import { at, sleepAtLeast as sleep } from '@tollgate/testkit'

describe('Lua and its TS twin decide identically', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  beforeAll(async () => {
    client = await nodeRedis()
  })
  afterAll(async () => {
    await client.quit()
  })

  const concurrency = (limit: number, windowMs: number, store: RedisStore) =>
    new RateLimiter({ store, prefix: uniquePrefix('twin'), concurrency: limit, lease: windowMs })
  it.each([...ALL_ALGORITHMS, 'concurrency' as const])('%s', async (algorithm: Algorithm) => {
    const redis = new RedisStore(client)
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 30, max: 100 }),
        fc.array(op, { minLength: 6, maxLength: 20 }),
        async (limit, windowMs, ops) => {
          const limiter =
            algorithm === 'concurrency'
              ? concurrency(limit, windowMs, redis)
              : new RateLimiter({
                  store: redis,
                  prefix: uniquePrefix('twin'),
                  limit,
                  window: windowMs,
                  algorithm,
                })
          const entries: StoreEntry[] = limiter
            .keysFor('k')
            .map((key, i) => ({ policy: at(limiter.policies, i), key }))
          const memory = new MemoryStore()
          let seq = 0
          const spends: { tags: number[]; cost: number; id: string }[] = []
          for (const o of ops) {
            if (o.kind === 'sleep') {
              await sleep(o.ms)
            } else if (o.kind === 'refund') {
              const spend = spends.pop()
              if (!spend) continue
              const cost = Math.min(o.cost, spend.cost)
              const nowUs = await redis.refund(entries, spend.tags, cost)
              memory.refundAt(nowUs, entries, spend.tags, cost)
            } else if (o.kind === 'settle') {
              // a settlement of the newest spend, with its marker (a second one of a spend changes nothing)
              const spend = spends[spends.length - 1]
              if (!spend || algorithm === 'concurrency') continue
              const once = { id: `s${spend.id}`, spent: spend.cost, settle: true }
              const nowUs = await redis.refund(entries, spend.tags, spend.cost - o.actual, once)
              memory.refundAt(nowUs, entries, spend.tags, spend.cost - o.actual, once)
            } else {
              const fromRedis: StoreReply = await (o.kind === 'consume'
                ? redis.consume(entries, o.cost)
                : redis.peek(entries, o.cost))
              const twin =
                o.kind === 'consume'
                  ? memory.consumeAt(fromRedis.nowUs, entries, o.cost)
                  : memory.peekAt(fromRedis.nowUs, entries, o.cost)
              expect({ op: o, results: twin.results }).toEqual({ op: o, results: fromRedis.results })
              const r = at(fromRedis.results, 0)
              if (o.kind === 'consume' && r.allowed && o.cost > 0)
                spends.push({ tags: [r.tag], cost: o.cost, id: `${limiter.prefix}:${seq++}` })
            }
          }
        },
      ),
      { numRuns: 25 },
    )
  })
})

type PairOp =
  | { kind: 'consume' | 'peek'; costs: [number, number] }
  | { kind: 'refund'; costs: [number, number] }
  | { kind: 'settle'; actual: [number | undefined, number | undefined] }
  | { kind: 'sleep'; ms: number }

const pairCost = fc.tuple(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 8 }))
const pairOp: fc.Arbitrary<PairOp> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('consume' as const), costs: pairCost }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('peek' as const), costs: pairCost }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('refund' as const), costs: pairCost }) },
  {
    weight: 2,
    // a record settles the pairs it names (undefined: left as charged); overdrafts included
    arbitrary: fc.record({
      kind: fc.constant('settle' as const),
      actual: fc.tuple(
        fc.option(fc.integer({ min: 0, max: 12 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 20 }), { nil: undefined }),
      ),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('sleep' as const), ms: fc.integer({ min: 1, max: 40 }) }),
  },
)

describe('Lua and its TS twin decide identically with a cost per policy', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  beforeAll(async () => {
    client = await nodeRedis()
  })
  afterAll(async () => {
    await client.quit()
  })

  it.each(ALL_ALGORITHMS)('%s with a second policy of any algorithm', async (algorithm: Algorithm) => {
    const redis = new RedisStore(client)
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 30, max: 100 }),
        fc.constantFrom(...ALL_ALGORITHMS),
        fc.array(pairOp, { minLength: 6, maxLength: 20 }),
        async (limitA, limitB, windowMs, other, ops) => {
          const limiter = new RateLimiter({
            store: redis,
            prefix: uniquePrefix('twin2'),
            policies: {
              requests: { limit: limitA, window: windowMs, algorithm },
              tokens: { limit: limitB, window: windowMs, algorithm: other },
            },
          })
          const entries: StoreEntry[] = limiter
            .keysFor('k')
            .map((key, i) => ({ policy: at(limiter.policies, i), key }))
          const memory = new MemoryStore()
          let seq = 0
          const spends: { tags: number[]; costs: number[]; id: string }[] = []
          for (const o of ops) {
            if (o.kind === 'sleep') {
              await sleep(o.ms)
            } else if (o.kind === 'refund') {
              // a refund by record, under the spend's marker: each pair at most what it was charged
              const spend = spends[spends.length - 1]
              if (!spend) continue
              const cost = o.costs.map((c, i) => Math.min(c, at(spend.costs, i)))
              const once = { id: `r${spend.id}`, spent: spend.costs }
              const nowUs = await redis.refund(entries, spend.tags, cost, once)
              memory.refundAt(nowUs, entries, spend.tags, cost, once)
            } else if (o.kind === 'settle') {
              const spend = spends[spends.length - 1]
              if (!spend) continue
              const delta = o.actual.map((a, i) => (a === undefined ? 0 : at(spend.costs, i) - a))
              const once = { id: `r${spend.id}`, spent: spend.costs, settle: true }
              const nowUs = await redis.refund(entries, spend.tags, delta, once)
              memory.refundAt(nowUs, entries, spend.tags, delta, once)
            } else {
              const costs = o.costs
              const fromRedis: StoreReply = await (o.kind === 'consume'
                ? redis.consume(entries, costs)
                : redis.peek(entries, costs))
              const twin =
                o.kind === 'consume'
                  ? memory.consumeAt(fromRedis.nowUs, entries, costs)
                  : memory.peekAt(fromRedis.nowUs, entries, costs)
              expect({ op: o, results: twin.results }).toEqual({ op: o, results: fromRedis.results })
              const allowed = fromRedis.results.every((r) => r.allowed)
              if (o.kind === 'consume' && allowed && costs.some((c) => c > 0))
                spends.push({
                  tags: fromRedis.results.map((r) => r.tag),
                  costs: [...costs],
                  id: `${limiter.prefix}:${seq++}`,
                })
            }
          }
          // the state each left behind: a peek of every pair at once
          const last = await redis.peek(entries, [1, 1])
          expect(memory.peekAt(last.nowUs, entries, [1, 1]).results).toEqual(last.results)
        },
      ),
      { numRuns: 20 },
    )
  })
})
