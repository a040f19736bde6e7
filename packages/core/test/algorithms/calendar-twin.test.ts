/**
 * calendar.lua and its TS twin decide identically for the same clock: random consume / peek / refund /
 * settle / sleep sequences against real Redis, each replayed on a MemoryStore at the microsecond Redis
 * reported. Periods of uneven lengths (60 to 150 ms, as months and DST days are uneven) come from a test
 * boundary provider that both sides read; no clock in Lua is faked.
 *
 * The bounds a call sends hold its period and the next, so a call that reaches Redis more than a period
 * after it read the app's clock is refused by the script before it writes anything. Real periods are
 * days; here a stalled worker can take that long, so such a call is left out on both sides and counted.
 */
import { sleepAtLeast as sleep } from '@tollgate/testkit'
import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import fc from 'fast-check'
import { MemoryStore, RateLimiter, RedisStore } from '../../src'
import { setBoundaryProvider } from '../../src/calendar'
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
    arbitrary: fc.record({ kind: fc.constant('settle' as const), actual: fc.integer({ min: 0, max: 15 }) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('sleep' as const), ms: fc.integer({ min: 1, max: 40 }) }),
  },
)

/** Periods from `origin` on of lengths base, base + 17, base + 34, base, ... ms: uneven, and the same for both sides. */
function unevenPeriods(origin: number, base: number) {
  return (_: unknown, nowMs: number): [number, number, number, number] => {
    const starts = [origin - base]
    let t = origin
    for (let k = 0; t <= nowMs + 4 * (base + 34); k++) {
      starts.push(t)
      t += base + 17 * (k % 3)
    }
    let i = starts.length - 1
    while (starts[i]! > nowMs) i--
    return [starts[i - 1] ?? starts[i]! - base, starts[i]!, starts[i + 1]!, starts[i + 2]!]
  }
}

/** The reply, or undefined when the script refused a call that reached Redis a period late. */
async function unlessStalled(call: Promise<StoreReply>): Promise<StoreReply | undefined> {
  try {
    return await call
  } catch (error) {
    if (String((error as Error).cause ?? error).includes('outside the periods sent')) return undefined
    throw error
  }
}

describe('calendar.lua and its TS twin decide identically', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  beforeAll(async () => {
    client = await nodeRedis()
  })
  afterAll(async () => {
    setBoundaryProvider(undefined)
    await client.quit()
  })

  it.each(['none', ...ALL_ALGORITHMS] as const)('with a second policy of: %s', async (other) => {
    const redis = new RedisStore(client)
    let compared = 0
    let stalled = 0
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 60, max: 150 }),
        fc.array(op, { minLength: 6, maxLength: 20 }),
        async (limit, base, ops) => {
          setBoundaryProvider(unevenPeriods(Date.now() - 1000, base))
          const calendar = { limit, window: { calendar: 'day' as const, timeZone: 'Asia/Kathmandu' } }
          const limiter = new RateLimiter({
            store: redis,
            prefix: uniquePrefix('caltwin'),
            policies:
              other === 'none'
                ? { quota: calendar }
                : { quota: calendar, rate: { limit: 8, window: base, algorithm: other } },
          })
          const entries: StoreEntry[] = limiter
            .keysFor(limiter.policies.length === 1 ? { quota: 'k' } : { quota: 'k', rate: 'k' })
            .map((key, i) => ({ policy: limiter.policies[i]!, key }))
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
              const spend = spends[spends.length - 1]
              if (!spend) continue
              const once = { id: `s${spend.id}`, spent: spend.cost, settle: true }
              const nowUs = await redis.refund(entries, spend.tags, spend.cost - o.actual, once)
              memory.refundAt(nowUs, entries, spend.tags, spend.cost - o.actual, once)
            } else {
              const fromRedis = await unlessStalled(
                o.kind === 'consume' ? redis.consume(entries, o.cost) : redis.peek(entries, o.cost),
              )
              if (fromRedis === undefined) {
                stalled++
                continue
              }
              compared++
              const twin =
                o.kind === 'consume'
                  ? memory.consumeAt(fromRedis.nowUs, entries, o.cost)
                  : memory.peekAt(fromRedis.nowUs, entries, o.cost)
              expect({ op: o, results: twin.results }).toEqual({ op: o, results: fromRedis.results })
              if (o.kind === 'consume' && fromRedis.results.every((r) => r.allowed) && o.cost > 0)
                spends.push({
                  tags: fromRedis.results.map((r) => r.tag),
                  cost: o.cost,
                  id: `${limiter.prefix}:${seq++}`,
                })
            }
          }
          let last: StoreReply | undefined
          while (last === undefined) last = await unlessStalled(redis.peek(entries, 1))
          expect(memory.peekAt(last.nowUs, entries, 1).results).toEqual(last.results)
        },
      ),
      { numRuns: 15 },
    )
    // At most a stall or two on a loaded machine; most calls must have been compared.
    expect(compared).toBeGreaterThan(10 * stalled)
  })
})
