/** Concurrency policies: leases taken, released, expired, and mixed with rate policies. */
import { RateLimiter } from '@tollgate/core'
import { take } from '../checked'
import { sleepAtLeast as sleep } from '../time'
import { type StoreSuiteContext, seq, uniquePrefix } from './context'

export function describeConcurrency(s: StoreSuiteContext): void {
  describe('concurrency', () => {
    const leases = (concurrency = 3, lease: number | '1d' = '1d') =>
      new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix('conc'),
        concurrency,
        lease,
        timeoutMs: s.fx.timeoutMs,
      })

    it('holds at most N at once; a release frees a slot at once', async () => {
      const limiter = leases(3)
      const held = await seq(limiter, 'k', 3)
      expect(held.map((d) => d.remaining)).toEqual([2, 1, 0])
      const refused = await limiter.consume('k')
      expect(refused).toMatchObject({ allowed: false, remaining: 0 })
      expect(refused.policies[0]).toMatchObject({ algorithm: 'concurrency', limit: 3 })
      // the lease's expiry bounds the wait: an upper bound, a release comes sooner
      expect(refused.retryAfterMs).toBeGreaterThan(0)
      expect(refused.retryAfterMs).toBeLessThanOrEqual(86_400_000)
      await limiter.release(held[1]!)
      expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 0 })
      expect((await limiter.consume('k')).allowed).toBe(false)
    })

    it('a release is once: repeating it frees no other lease', async () => {
      const limiter = leases(2)
      const [a] = take(await seq(limiter, 'k', 2), 1)
      await limiter.release(a)
      await limiter.release(a)
      await limiter.release({ ...a }) // a copy of the decision too (another process could send it)
      await limiter.refund(a)
      expect((await limiter.consume('k')).allowed).toBe(true)
      expect((await limiter.consume('k')).allowed).toBe(false)
    })

    it('weighs costs, refuses a cost above N forever, and a refused call takes nothing', async () => {
      const limiter = leases(5)
      const big = await limiter.consume('k', { cost: 3 })
      expect(big.remaining).toBe(2)
      expect((await limiter.consume('k', { cost: 3 })).allowed).toBe(false)
      const never = await limiter.consume('k', { cost: 6 })
      expect(never.retryAfterMs).toBe(Number.POSITIVE_INFINITY)
      expect((await limiter.peek('k')).remaining).toBe(2)
      await limiter.release(big)
      expect((await limiter.peek('k')).remaining).toBe(5)
    })

    it('an unreleased lease expires: the slot comes back after the lease, not before', async () => {
      const lease = s.fx.shortWindowMs ?? 300
      const limiter = leases(1, lease)
      const held = await limiter.consume('k')
      const refused = await limiter.consume('k')
      expect(refused.allowed).toBe(false)
      expect(refused.retryAfterMs).toBeLessThanOrEqual(lease)
      await sleep(refused.retryAfterMs)
      const next = await limiter.consume('k')
      expect(next.allowed).toBe(true)
      await limiter.release(held) // after its expiry: harmless, the new lease stays
      expect((await limiter.consume('k')).allowed).toBe(false)
      await limiter.release(next)
      if (s.fx.exists) expect(await s.fx.exists(limiter.keysFor('k')[0]!)).toBe(false) // nothing left
    })

    it('with a rate policy: all or nothing in one call', async () => {
      const both = new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix('conc-rate'),
        timeoutMs: s.fx.timeoutMs,
        policies: {
          rate: { limit: 2, window: '1d', algorithm: 'fixed-window' },
          inflight: { concurrency: 1, lease: '1d' },
        },
      })
      const first = await both.consume('k')
      expect(first.allowed).toBe(true)
      // concurrency refuses: the rate policy is not charged
      const busy = await both.consume('k')
      expect(busy.policies.map((p) => p.allowed)).toEqual([true, false])
      expect((await both.peek('k')).policies.map((p) => p.remaining)).toEqual([1, 0])
      await both.release(first)
      expect((await both.peek('k')).policies.map((p) => p.remaining)).toEqual([1, 1])
      const second = await both.consume('k')
      await both.release(second)
      // the rate policy refuses: no lease is taken
      const spent = await both.consume('k')
      expect(spent.policies.map((p) => p.allowed)).toEqual([false, true])
      expect((await both.peek('k')).policies.map((p) => p.remaining)).toEqual([0, 1])
    })
  })
}
