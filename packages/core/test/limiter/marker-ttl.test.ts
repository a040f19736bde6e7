/**
 * A refund-once marker expires when no pair of its spend can change any more, per algorithm, never
 * later: a fixed window at its end, a sliding window at the end of the next, a sliding log when the spend
 * leaves the window, a token bucket or GCRA once the spend has drained plus the two bursts an
 * over-charge may reach. Against real Redis (PEXPIRETIME read back), one-script and batched calls alike.
 */
import { at, clearOfBoundary, defined, take } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { type Algorithm, type Decision, MemoryStore, RateLimiter, RedisStore } from '../../src'
import { nodeRedis } from '../clients'

const DAY = 86_400_000
const LIMIT = 100

/** When the marker of a decision's spend expires (its key ends with the spend's id, whatever the layout). */
async function markerExpiry(client: Awaited<ReturnType<typeof nodeRedis>>, d: Decision): Promise<number> {
  const t = d.refundToken!
  const found = await client.keys(`*!${t.nonce}${t.seq.toString(36)}`)
  expect(found).toHaveLength(1)
  return client.pExpireTime(at(found, 0))
}

/** When the marker of a spend tagged `tag` must expire, as each algorithm bounds its refunds (epoch ms). */
function horizon(algorithm: Algorithm, tag: number): number {
  if (algorithm === 'fixed-window') return (tag + 1) * DAY
  if (algorithm === 'sliding-window') return (tag + 2) * DAY
  if (algorithm === 'sliding-log') return Math.ceil(tag / 1000) + DAY
  const interval = Math.ceil((DAY * 1000) / LIMIT)
  return Math.ceil((tag + 2 * LIMIT * interval) / 1000)
}

describe('refund-once markers last as long as their spend can change', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let stores: Record<string, RedisStore>
  beforeAll(async () => {
    client = await nodeRedis()
    stores = {
      plain: new RedisStore(client),
      batched: new RedisStore(client, { batch: true }),
      compact: new RedisStore(client, {
        storage: 'compact',
        secret: 'a-secret-of-32-bytes-or-more-0123456789',
      }),
    }
  })
  afterAll(async () => {
    await client.quit()
  })
  beforeEach(async () => {
    // the spend and its settlement in one day: a fixed window's spend settled after its end leaves none
    await clearOfBoundary(DAY, 10_000)
  })

  const ALGORITHMS: Algorithm[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra']
  const cases = ALGORITHMS.flatMap((algorithm) => [
    [algorithm, 'plain'],
    [algorithm, 'batched'],
    ...(algorithm.endsWith('-window') ? [[algorithm, 'compact']] : []),
  ])

  it.each(cases)('%s (%s store): settled, and refunded', async (algorithm, kind) => {
    const limiter = new RateLimiter({
      store: defined(stores[kind], `the ${kind} store`),
      prefix: uniquePrefix('marker'),
      limit: LIMIT,
      window: '1d',
      algorithm: algorithm as Algorithm,
    })
    const settled = await limiter.consume('user', { cost: 10 })
    const refunded = await limiter.consume('user', { cost: 10 })
    // in one turn: a batching store sends the second with batch.lua
    await Promise.all([limiter.settle(settled, 4), limiter.refund(refunded, { cost: 3 })])
    for (const d of [settled, refunded]) {
      const expected = horizon(algorithm as Algorithm, at(d.refundToken!.tags, 0))
      expect(await markerExpiry(client, d)).toBe(expected)
    }
  })

  it('with two policies, the longer horizon of the two', async () => {
    const limiter = new RateLimiter({
      store: defined(stores.plain, 'the plain store'),
      prefix: uniquePrefix('marker'),
      policies: {
        day: { limit: LIMIT, window: '1d', algorithm: 'fixed-window' },
        bucket: { limit: LIMIT, window: '1d', algorithm: 'token-bucket' },
      },
    })
    const d = await limiter.consume('user', { cost: 10 })
    await limiter.settle(d, 20)
    const [day, bucket] = take(d.refundToken!.tags, 2)
    const expected = Math.max(horizon('fixed-window', day), horizon('token-bucket', bucket))
    expect(await markerExpiry(client, d)).toBe(expected)
  })
})

describe('MemoryStore: the marker guards its spend until its horizon, and goes after it', () => {
  it.each(['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra'] as Algorithm[])(
    '%s',
    async (algorithm) => {
      let nowUs = Date.UTC(2026, 0, 1, 12) * 1000
      const store = new MemoryStore({ clock: () => nowUs })
      const limiter = new RateLimiter({ store, prefix: 'm', limit: LIMIT, window: '1d', algorithm })
      const d = await limiter.consume('user', { cost: 10 })
      await limiter.settle(d, 4)
      const at = horizon(algorithm, d.refundToken!.tags[0]!) // one policy, one tag
      // the last millisecond a settlement could still change the pair: a copy's is refused
      nowUs = at * 1000 - 1000
      const before = (await limiter.peek('user')).remaining
      await limiter.settle(JSON.parse(JSON.stringify(d)), 90)
      expect((await limiter.peek('user')).remaining).toBe(before)
      // past it, the next write sweeps the marker along with the spend's own state
      nowUs = at * 1000 + 2000
      await limiter.consume('other')
      expect(store.size).toBe(1)
    },
  )
})
