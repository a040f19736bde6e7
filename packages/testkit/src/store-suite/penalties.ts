/** Penalties: charges past the limit and blocks, and what they leave in the store. */
import { type Algorithm, RateLimiter } from '@tollgate/core'
import { take } from '../checked'
import { sleepAtLeast as sleep } from '../time'
import { ALL_ALGORITHMS, type StoreSuiteContext, seq, uniquePrefix } from './context'

export function describePenalties(s: StoreSuiteContext): void {
  describe('penalties', () => {
    const DAY = 86_400_000
    const penalised = (algorithm: Algorithm, limit: number, penalty: object, window: number | '1d' = '1d') =>
      new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix(`pen-${algorithm}`),
        timeoutMs: s.fx.timeoutMs,
        denyCache: false,
        limit,
        window,
        algorithm,
        penalty: penalty as never,
      })

    it.each(ALL_ALGORITHMS)(
      '%s: the second refusal starts a block; peek reports it, a refund does not lift it, reset does',
      async (algorithm) => {
        const limiter = penalised(algorithm, 2, { after: 2, block: '2d' })
        const [first] = take(await seq(limiter, 'k', 2), 1)
        const refused = await limiter.consume('k')
        expect(refused).toMatchObject({ allowed: false })
        expect(refused.policies[0]!.blocked).toBeUndefined()
        expect(refused.retryAfterMs).toBeLessThanOrEqual(2 * DAY)
        const blocking = await limiter.consume('k')
        // the refusal that starts the block says so, with the block's length
        expect(blocking).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 2 * DAY })
        expect(blocking.policies[0]).toMatchObject({ blocked: true, retryAfterMs: 2 * DAY })
        const peeked = await limiter.peek('k')
        expect(peeked.allowed).toBe(false)
        expect(peeked.policies[0]!.blocked).toBe(true)
        expect(peeked.retryAfterMs).toBeGreaterThan(DAY)
        await limiter.refund(first)
        const still = await limiter.consume('k')
        expect(still).toMatchObject({ allowed: false, remaining: 0 })
        expect(still.retryAfterMs).toBeGreaterThan(DAY)
        await limiter.reset('k')
        expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 1 })
      },
    )

    it('a block lasts its time, then admits; repeat offences grow by factor up to max', async () => {
      // A refusal's retry is the longer of the policy's and the block's: a policy that refills within
      // 200 ms keeps the block's length visible.
      const limiter = penalised('gcra', 1, { block: 250, factor: 2, max: 600 }, 200)
      const lengths: number[] = []
      for (let i = 0; i < 4; i++) {
        let d = await limiter.consume('k')
        while (d.allowed) d = await limiter.consume('k') // the first refusal is an offence (after: 1)
        expect(d.policies[0]!.blocked).toBe(true)
        lengths.push(d.retryAfterMs)
        const during = await limiter.consume('k')
        expect(during).toMatchObject({ allowed: false })
        expect(during.retryAfterMs).toBeLessThanOrEqual(d.retryAfterMs)
        await sleep(d.retryAfterMs)
      }
      expect(lengths).toEqual([250, 500, 600, 600])
      await limiter.reset('k')
      expect((await limiter.consume('k')).allowed).toBe(true)
    })

    it('a block ends when its time is up: the next request the policy admits goes through', async () => {
      // a unit refills every window / 2: long enough that none can refill between the three calls
      const limiter = penalised('token-bucket', 2, { block: 150 }, Math.max(1000, s.fx.shortWindowMs ?? 0))
      await seq(limiter, 'k', 2)
      const blocking = await limiter.consume('k')
      // the longer of the block and the policy's own wait (a slow store's test window can be longer)
      expect(blocking).toMatchObject({ allowed: false })
      expect(blocking.policies[0]!.blocked).toBe(true)
      expect(blocking.retryAfterMs).toBeGreaterThanOrEqual(150)
      await sleep(blocking.retryAfterMs)
      expect((await limiter.consume('k')).allowed).toBe(true)
    })

    it('blocks one (policy, identity) pair in a call of several policies, and batches alike', async () => {
      const login = new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix('pen-login'),
        timeoutMs: s.fx.timeoutMs,
        denyCache: false,
        policies: {
          ip: { limit: 20, window: '1d' },
          account: { limit: 2, window: '1d', algorithm: 'gcra', penalty: { block: '2d' } },
        },
      })
      const victim = { ip: 'ip:1', account: 'email:v' }
      // one turn: a batch on a batching store, evaluated in order
      const ds = await Promise.all([1, 2, 3, 4, 5].map(() => login.consume(victim)))
      expect(ds.map((d) => d.allowed)).toEqual([true, true, false, false, false])
      expect(ds[2]!.retryAfterMs).toBe(2 * DAY)
      for (const d of ds.slice(2)) {
        expect(d.policies[1]).toMatchObject({ policy: 'account', allowed: false, blocked: true })
        expect(d.retryAfterMs).toBeGreaterThan(DAY)
        // (on a cluster the two identities live in two slots: the ip spend is given back after the refusal)
        expect(d.policies[0]).toMatchObject({ policy: 'ip', allowed: true })
      }
      // the ip pair is not blocked: another account from the same ip goes through
      const other = await login.consume({ ip: 'ip:1', account: 'email:other' })
      expect(other.allowed).toBe(true)
      expect(other.policies[0]!.remaining).toBe(17)
      await login.reset(victim)
      expect((await login.consume(victim)).allowed).toBe(true)
    })

    it('peek never counts a refusal; a cost above the limit is not an offence', async () => {
      const limiter = penalised('sliding-window', 1, { block: '2d' })
      await limiter.consume('k')
      for (let i = 0; i < 3; i++) expect((await limiter.peek('k')).policies[0]!.blocked).toBeUndefined()
      const never = await limiter.consume('k', { cost: 2 })
      expect(never.retryAfterMs).toBe(Number.POSITIVE_INFINITY)
      expect((await limiter.peek('k')).policies[0]!.blocked).toBeUndefined()
    })

    it('the penalty state expires with the block (no lasting key)', async () => {
      if (!s.fx.pttl) return
      const limiter = penalised('fixed-window', 1, { block: 5000 })
      await seq(limiter, 'k', 2)
      const ttl = await s.fx.pttl(`${limiter.keysFor('k')[0]}!p`)
      expect(ttl).toBeGreaterThan(0)
      expect(ttl).toBeLessThanOrEqual(5000)
    })
  })
}
