/** Several policies in one call: all or nothing, and the refusing policy named. */
import { RateLimiter } from '@tollgate/core'
import { type StoreSuiteContext, seq, uniquePrefix } from './context'

export function describeSeveralPolicies(s: StoreSuiteContext): void {
  describe('several policies in one call', () => {
    const makeLogin = () =>
      new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix('login'),
        timeoutMs: s.fx.timeoutMs,
        policies: {
          ip: { limit: 5, window: '1d' },
          account: { limit: 2, window: '1d', algorithm: 'fixed-window' },
        },
      })

    it('charges every policy, or none when one refuses', async () => {
      const login = makeLogin()
      const key = { ip: 'ip:1.2.3.4', account: 'email:a@b.c' }
      const a = await login.consume(key)
      expect(a.policies.map((p) => [p.policy, p.remaining])).toEqual([
        ['ip', 4],
        ['account', 1],
      ])
      expect(a).toMatchObject({ allowed: true, limit: 2, remaining: 1 }) // binding: fewest left
      await login.consume(key)
      const refused = await login.consume(key)
      expect(refused.allowed).toBe(false)
      expect(refused.limit).toBe(2)
      expect(refused.policies.find((p) => p.policy === 'ip')).toMatchObject({ allowed: true, remaining: 3 })
      // the refused call did not charge the ip policy
      const other = await login.consume({ ip: 'ip:1.2.3.4', account: 'email:other' })
      expect(other.policies[0]!.remaining).toBe(2)
    })

    it('refunds every policy of an admitted call (attempt + refund on success)', async () => {
      const login = makeLogin()
      const key = { ip: 'ip:9', account: 'email:z' }
      for (let i = 0; i < 4; i++) {
        await login.attempt(key, async (a) => {
          await a.refund() // a successful login costs nothing
        })
      }
      const p = await login.peek(key)
      expect(p.policies.map((x) => x.remaining)).toEqual([5, 2])
    })

    it('one identity for every policy when the key is a string', async () => {
      const both = new RateLimiter({
        store: s.fx.store,
        prefix: uniquePrefix('both'),
        timeoutMs: s.fx.timeoutMs,
        policies: {
          burst: { limit: 2, window: '1h' }, // long enough that no window boundary falls inside the test
          daily: { limit: 3, window: '1d', algorithm: 'fixed-window' },
        },
      })
      const ds = await seq(both, 'user:7', 3)
      expect(ds.map((d) => d.allowed)).toEqual([true, true, false])
      expect(ds[2]!.policies.map((p) => p.policy)).toEqual(['burst', 'daily'])
      expect(ds[2]!.policies[1]!.remaining).toBe(1)
    })
  })
}
