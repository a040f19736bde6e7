/**
 * Windows slide as specified, judged on the server's own timestamps (each script returns the TIME it
 * decided at): the fixed window admits up to 2 x limit around a boundary; the sliding window does not;
 * the sliding log never admits more than `limit` in any window-long interval; GCRA and the token bucket
 * never more than burst + floor(L / T) in any interval of length L.
 */

import { at, sleepAtLeast } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { type Algorithm, RateLimiter, RedisStore } from '../../src'
import type { StoreEntry } from '../../src/entries/scripts'
import { nodeRedis } from '../clients'

const WINDOW = 300
const LIMIT = 5

describe('windows at the boundary, on server time', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let store: RedisStore
  beforeAll(async () => {
    client = await nodeRedis()
    store = new RedisStore(client)
  })
  afterAll(async () => {
    await client.quit()
  })

  const setup = (algorithm: Algorithm) => {
    const limiter = new RateLimiter({
      store,
      prefix: uniquePrefix(`time-${algorithm}`),
      limit: LIMIT,
      window: WINDOW,
      algorithm,
    })
    const entries: StoreEntry[] = limiter
      .keysFor('k')
      .map((key, i) => ({ policy: at(limiter.policies, i), key }))
    return async () => {
      const reply = await store.consume(entries, 1)
      return { allowed: at(reply.results, 0).allowed, atUs: reply.nowUs }
    }
  }

  /** Sleeps until `beforeMs` ms before the next window boundary (app and Redis share this machine's clock). */
  const untilBoundary = async (beforeMs: number) => {
    let wait = WINDOW - (Date.now() % WINDOW) - beforeMs
    if (wait < 5) wait += WINDOW
    await sleepAtLeast(wait)
  }

  const windowOf = (us: number) => Math.floor(us / 1000 / WINDOW)
  type Shot = { allowed: boolean; atUs: number }

  /**
   * Fires `n` calls just before a boundary and `n` just after it. A loaded machine can miss the timing;
   * then the scenario is tried again on fresh keys (the precondition is checked on server time).
   */
  async function aroundBoundary(algorithm: Algorithm, n: number): Promise<{ before: Shot[]; after: Shot[] }> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const consume = setup(algorithm)
      await untilBoundary(60)
      const before = await Promise.all(Array.from({ length: n }, consume))
      await untilBoundary(WINDOW - 15) // 15 ms into the next window
      const after = await Promise.all(Array.from({ length: n }, consume))
      const w = windowOf(at(before, 0).atUs)
      const boundaryMs = (w + 1) * WINDOW
      const inTime =
        before.every((r) => windowOf(r.atUs) === w && boundaryMs - r.atUs / 1000 < 100) &&
        after.every((r) => windowOf(r.atUs) === w + 1 && r.atUs / 1000 - (w + 1) * WINDOW < 40)
      if (inTime) return { before, after }
    }
    throw new Error('could not place calls around a window boundary in 5 attempts')
  }

  it('fixed-window admits up to 2 x limit around a boundary, and at most limit per aligned window', async () => {
    const { before, after } = await aroundBoundary('fixed-window', LIMIT + 2)
    expect(before.filter((r) => r.allowed)).toHaveLength(LIMIT)
    expect(after.filter((r) => r.allowed)).toHaveLength(LIMIT)
    const admitted = [...before, ...after].filter((r) => r.allowed).map((r) => r.atUs)
    const spanMs = (Math.max(...admitted) - Math.min(...admitted)) / 1000
    expect(spanMs).toBeLessThan(WINDOW) // 2 x limit inside one window-long interval
  })

  it('sliding-window does not: just after the boundary, the weighted count still holds most of the quota', async () => {
    const { before, after } = await aroundBoundary('sliding-window', LIMIT)
    expect(before.every((r) => r.allowed)).toBe(true)
    // < 40 ms into the next window the previous window still weighs ceil(5 x 260/300) = 5: nobody more.
    // (Rounded down it would weigh 4 and let a 6th request through.)
    expect(after.filter((r) => r.allowed)).toHaveLength(0)
  })

  it.each(['sliding-log', 'gcra', 'token-bucket', 'sliding-window'] as const)(
    '%s: a steady stream never breaks its bound, on server time',
    async (algorithm) => {
      const consume = setup(algorithm)
      const admitted: number[] = []
      const t0 = performance.now()
      while (performance.now() - t0 < 3 * WINDOW) {
        const batch = await Promise.all([consume(), consume()])
        for (const r of batch) if (r.allowed) admitted.push(r.atUs)
        await sleepAtLeast(7)
      }
      admitted.sort((a, b) => a - b)
      expect(admitted.length).toBeGreaterThan(LIMIT)
      const windowUs = WINDOW * 1000
      const T = Math.ceil(windowUs / LIMIT)
      for (let i = 0; i < admitted.length; i++) {
        for (let j = i; j < admitted.length; j++) {
          const count = j - i + 1
          const span = at(admitted, j) - at(admitted, i)
          if (algorithm === 'sliding-log' && span < windowUs) expect(count).toBeLessThanOrEqual(LIMIT)
          if (algorithm === 'gcra' || algorithm === 'token-bucket') {
            expect(count).toBeLessThanOrEqual(LIMIT + Math.floor(span / T))
          }
          if (
            algorithm === 'sliding-window' &&
            Math.floor(at(admitted, i) / windowUs) === Math.floor(at(admitted, j) / windowUs)
          ) {
            expect(count).toBeLessThanOrEqual(LIMIT) // per aligned window
          }
        }
      }
    },
  )
})
