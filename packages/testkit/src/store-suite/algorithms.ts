/** Each algorithm alone: counting down, honest retry times, costs, refunds, TTLs. */

import { take } from '../checked'
import { crossedBoundary, sleepAtLeast as sleep } from '../time'
import { ALL_ALGORITHMS, type StoreSuiteContext, seq, TTL_BOUND } from './context'

export function describeAlgorithms(s: StoreSuiteContext): void {
  const { make } = s
  describe.each(ALL_ALGORITHMS)('%s', (algorithm) => {
    it('counts down 4,3,2,1,0 then refuses with an honest retry time', async () => {
      const limiter = make(algorithm)
      const ds = await seq(limiter, 'user:1', 6)
      expect(ds.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0, 0])
      expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, false])
      expect(ds[0]!.limit).toBe(5)
      expect(ds[4]!.retryAfterMs).toBe(0)
      expect(ds[5]!.retryAfterMs).toBeGreaterThan(0)
      expect(ds[5]!.retryAfterMs).toBeLessThanOrEqual(2 * 86_400_000)
      expect(ds[5]!.policies).toHaveLength(1)
      expect(ds[5]!.policies[0]).toMatchObject({
        policy: 'default',
        allowed: false,
        limit: 5,
        windowMs: 86_400_000,
      })
    })

    it('weighs costs and a refusal costs nothing', async () => {
      const limiter = make(algorithm)
      expect((await limiter.consume('k', { cost: 2 })).remaining).toBe(3)
      const refused = await limiter.consume('k', { cost: 4 })
      expect(refused.allowed).toBe(false)
      expect(refused.remaining).toBe(3)
      expect((await limiter.consume('k', { cost: 3 })).remaining).toBe(0)
      expect((await limiter.consume('k', { cost: 1 })).allowed).toBe(false)
    })

    it('refuses a cost above the limit forever, spending nothing', async () => {
      const limiter = make(algorithm)
      const d = await limiter.consume('k', { cost: 6 })
      expect(d.allowed).toBe(false)
      expect(d.retryAfterMs).toBe(Number.POSITIVE_INFINITY)
      expect((await limiter.peek('k')).remaining).toBe(5)
    })

    it('counts a large cost exactly (no Lua stack limit, no fail-open path)', async () => {
      const limiter = make(algorithm, 10_000, '1d') // a day: gcra and the bucket refill nothing meanwhile
      const a = await limiter.consume('k', { cost: 6000 })
      expect(a).toMatchObject({ allowed: true, remaining: 4000, source: 'store' })
      expect(await limiter.consume('k', { cost: 5000 })).toMatchObject({ allowed: false, remaining: 4000 })
      await limiter.refund(a)
      expect((await limiter.peek('k')).remaining).toBe(10_000)
    })

    it('a cost of 0 is admitted and spends nothing', async () => {
      const limiter = make(algorithm)
      await limiter.consume('k', { cost: 2 })
      const d = await limiter.consume('k', { cost: 0 })
      expect(d.allowed).toBe(true)
      expect(d.remaining).toBe(3)
    })

    it('peek does not spend', async () => {
      const limiter = make(algorithm)
      for (let i = 0; i < 3; i++) expect((await limiter.peek('k')).remaining).toBe(5)
      expect((await limiter.consume('k')).remaining).toBe(4)
      const p = await limiter.peek('k', { cost: 4 })
      expect(p).toMatchObject({ allowed: true, remaining: 4 })
      expect((await limiter.peek('k', { cost: 5 })).allowed).toBe(false)
      expect((await limiter.consume('k')).remaining).toBe(3)
    })

    it('refunds give back the spend and clamp at the full quota', async () => {
      const limiter = make(algorithm)
      const a = await limiter.consume('k', { cost: 2 })
      const b = await limiter.consume('k', { cost: 1 })
      expect(b.remaining).toBe(2)
      await limiter.refund(a)
      expect((await limiter.peek('k')).remaining).toBe(4)
      await limiter.refund(b)
      await limiter.refund(b) // twice: never above the quota
      await limiter.refund(a)
      expect((await limiter.peek('k')).remaining).toBe(5)
      const c = await limiter.consume('k', { cost: 3 })
      await limiter.refund(c, { cost: 1 })
      expect((await limiter.peek('k')).remaining).toBe(3)
    })

    it('refunding a refused decision is a no-op', async () => {
      const limiter = make(algorithm)
      await seq(limiter, 'k', 5)
      const refused = await limiter.consume('k')
      expect(refused.allowed).toBe(false)
      await limiter.refund(refused)
      expect((await limiter.peek('k')).remaining).toBe(0)
    })

    it('reset forgets the state', async () => {
      const limiter = make(algorithm)
      await seq(limiter, 'k', 5)
      await limiter.reset('k')
      expect((await limiter.consume('k')).remaining).toBe(4)
    })

    it('keys of different identities are independent', async () => {
      const limiter = make(algorithm)
      await seq(limiter, 'a', 5)
      expect((await limiter.consume('a')).allowed).toBe(false)
      expect((await limiter.consume('b')).remaining).toBe(4)
    })

    it('sleeping retryAfterMs then retrying is admitted', async () => {
      // The 4th call's refusal lapses no sooner than windowMs / limit after the first call (a unit of
      // gcra or token-bucket comes back, sliding-window's weighted count drops by one, sliding-log needs
      // the whole window), or at an aligned boundary for a fixed window. A window of 3 x the short
      // window puts that far beyond four calls on a loaded machine, and the sleep stays under 2 windows.
      const limit = 3
      const windowMs = 3 * (s.fx.shortWindowMs ?? 300)
      for (let attempt = 1; ; attempt++) {
        const limiter = make(algorithm, limit, windowMs)
        const started = Date.now()
        await seq(limiter, 'k', limit)
        const refused = await limiter.consume('k')
        // A round slower than that, or across a boundary, may rightly admit the 4th call: tried again,
        // by the clock Redis and the test share.
        const lapsed =
          Date.now() - started >= windowMs / limit ||
          (algorithm === 'fixed-window' && crossedBoundary(started, windowMs))
        if (refused.allowed && lapsed && attempt < 5) continue
        expect(refused.allowed).toBe(false)
        await sleep(refused.retryAfterMs)
        expect((await limiter.consume('k')).allowed).toBe(true)
        return
      }
    })

    it('leaves TTLs no longer than the algorithm needs, and nothing once idle', async () => {
      if (!s.fx.pttl || !s.fx.exists) return
      const windowMs = s.fx.shortWindowMs ?? 250
      const limiter = make(algorithm, 5, windowMs)
      const [key] = take(limiter.keysFor('k'), 1)
      let ttl = 0
      for (let attempt = 1; ; attempt++) {
        const started = Date.now()
        await seq(limiter, 'k', 5)
        ttl = await s.fx.pttl(key)
        // A fixed window's key rightly expires at its aligned end, which may fall between the last call
        // and the read on a loaded machine: tried again, by the clock Redis and the test share.
        const expired = ttl <= 0 && algorithm === 'fixed-window' && crossedBoundary(started, windowMs)
        if (!expired || attempt >= 5) break
      }
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(TTL_BOUND[algorithm](windowMs))
      await sleep(TTL_BOUND[algorithm](windowMs) + 30)
      expect(await s.fx.exists(key)).toBe(false)
    })
  })

  it('sliding-log never stores refused requests nor grows past the limit', async () => {
    if (!s.fx.zcard) return
    const limiter = make('sliding-log', 5, 200)
    const [key] = take(limiter.keysFor('k'), 1)
    for (let round = 0; round < 3; round++) {
      await seq(limiter, 'k', 20)
      expect(await s.fx.zcard(key)).toBeLessThanOrEqual(5)
      await sleep(120)
    }
  })
}
