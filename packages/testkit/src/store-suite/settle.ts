/** Settling a spend to its true cost, per algorithm and across policies. */
import { RateLimiter } from '@tollgate/core'
import { sleepAtLeast as sleep } from '../time'
import { ALL_ALGORITHMS, type StoreSuiteContext, uniquePrefix } from './context'

export function describeSettle(s: StoreSuiteContext): void {
  const { make } = s
  describe.each(ALL_ALGORITHMS)('settle: %s', (algorithm) => {
    it('charges the difference when the work cost more', async () => {
      const limiter = make(algorithm, 10)
      const d = await limiter.consume('k', { cost: 2 })
      await limiter.settle(d, 7)
      expect((await limiter.peek('k')).remaining).toBe(3)
    })

    it('gives the difference back when the work cost less, never below zero usage', async () => {
      const limiter = make(algorithm, 10)
      const d = await limiter.consume('k', { cost: 6 })
      await limiter.settle(d, 1)
      expect((await limiter.peek('k')).remaining).toBe(9)
      const e = await limiter.consume('k', { cost: 3 })
      await limiter.settle(e, 0)
      expect((await limiter.peek('k')).remaining).toBe(9)
    })

    it('applies once: a repeated settle, or one after a refund, changes nothing more', async () => {
      const limiter = make(algorithm, 10)
      const d = await limiter.consume('k', { cost: 1 })
      await limiter.settle(d, 4)
      await limiter.settle(d, 4)
      await limiter.settle(d, 9)
      await limiter.refund(d) // settled: nothing to give back
      expect((await limiter.peek('k')).remaining).toBe(6)
      const e = await limiter.consume('k', { cost: 2 })
      await limiter.refund(e, { cost: 1 })
      await limiter.settle(e, 5) // refunded: the spend stays as the refund left it
      expect((await limiter.peek('k')).remaining).toBe(5)
      // settles of one decision sent in one turn (one batched script on a batching store)
      const f = await limiter.consume('k', { cost: 1 })
      await Promise.all([limiter.settle(f, 3), limiter.settle(f, 3), limiter.peek('k')])
      expect((await limiter.peek('k')).remaining).toBe(2)
    })

    it('an overdraft past the limit refuses until it drains', async () => {
      const limiter = make(algorithm, 5)
      const d = await limiter.consume('k', { cost: 1 })
      await limiter.settle(d, 8) // three units past the limit
      const peeked = await limiter.peek('k')
      expect(peeked.remaining).toBe(0)
      const refused = await limiter.consume('k')
      expect(refused.allowed).toBe(false)
      expect(refused.retryAfterMs).toBeGreaterThan(0)
      if (algorithm === 'token-bucket' || algorithm === 'gcra') {
        // one unit every day / 5: the debt of 3 and the unit asked for drain first
        expect(refused.retryAfterMs).toBeGreaterThan((4 * 86_400_000) / 5 - 1_000)
      }
      // a refusal spends nothing, and the overdraft is not given back by one
      expect((await limiter.peek('k')).remaining).toBe(0)
    })

    it('never reaches into a newer window: a settle after the spend has drained is dropped', async () => {
      const windowMs = s.fx.shortWindowMs ?? 300
      const limiter = make(algorithm, 5, windowMs)
      const d = await limiter.consume('k', { cost: 1 })
      // two windows later every algorithm has forgotten the spend (the sliding window's previous
      // window included; a TAT's over-charge is at most one burst, drained by then)
      await sleep(2 * windowMs + 20)
      await limiter.settle(d, 5)
      expect((await limiter.peek('k')).remaining).toBe(5)
    })

    it('settles every policy of the call at once', async () => {
      const limiter = new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix('settle'),
        policies: {
          requests: { limit: 10, window: '1d', algorithm: 'fixed-window' },
          tokens: { limit: 100, window: '1d', algorithm },
        },
        timeoutMs: s.fx.timeoutMs,
      })
      const d = await limiter.consume('k', { cost: 10 })
      await limiter.settle(d, 40)
      const after = await limiter.peek('k')
      expect(after.policies.map((p) => p.remaining)).toEqual([0, 60])
      const e = await limiter.consume({ requests: 'a', tokens: 'b' }, { cost: 5 })
      await limiter.settle(e, 2)
      const other = await limiter.peek({ requests: 'a', tokens: 'b' })
      expect(other.policies.map((p) => p.remaining)).toEqual([8, 98])
    })
  })

  describe('settle', () => {
    it('leaves concurrency leases alone and charges the rate policies', async () => {
      const limiter = new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix('settle-conc'),
        policies: {
          tokens: { limit: 100, window: '1d', algorithm: 'gcra' },
          open: { algorithm: 'concurrency', concurrency: 100, lease: '1d' },
        },
        timeoutMs: s.fx.timeoutMs,
      })
      const d = await limiter.consume('k', { cost: 10 })
      await limiter.settle(d, 30)
      expect((await limiter.peek('k')).policies.map((p) => p.remaining)).toEqual([70, 90])
      await limiter.release(d)
      expect((await limiter.peek('k')).policies.map((p) => p.remaining)).toEqual([70, 100])
    })

    it('is a no-op for refused decisions and rejects a bad actual cost before the store', async () => {
      const limiter = make('fixed-window', 2)
      await limiter.consume('k', { cost: 2 })
      const refused = await limiter.consume('k')
      await limiter.settle(refused, 0)
      expect((await limiter.peek('k')).remaining).toBe(0)
      for (const bad of [-1, 1.5, Number.NaN, '3', undefined]) {
        await expect(limiter.settle(refused, bad as number)).rejects.toMatchObject({
          name: 'InputError',
        })
      }
    })

    it('settles under the per-call limits the spend was made under', async () => {
      const limiter = make('sliding-window', 5)
      const d = await limiter.consume('k', { cost: 1, limits: 50 })
      await limiter.settle(d, 30)
      expect((await limiter.peek('k', { limits: 50 })).remaining).toBe(20)
    })
  })
}
