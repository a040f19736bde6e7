/**
 * The headers of a calendar policy, from a real limiter's decision: `w` is the period's nominal length,
 * `t` (and Retry-After) the time left to its real end, here a month of 31 days.
 */
import { MemoryStore, RateLimiter } from '@tollgate/core'
import { rateLimitHeaders } from './headers'

describe('a calendar policy in the headers', () => {
  it('w is the nominal month, t and Retry-After count to the real end of the period', async () => {
    const limiter = new RateLimiter({
      store: new MemoryStore(),
      policies: {
        second: { limit: 10, window: '1s' },
        monthly: { limit: 1, window: { calendar: 'month', timeZone: 'Europe/Berlin' } },
      },
    })
    await limiter.consume('k')
    const refused = await limiter.consume('k')
    expect(refused.allowed).toBe(false)
    const monthly = refused.policies[1]!
    const h = rateLimitHeaders(refused, { format: 'ietf', partitionKey: false })
    expect(h['RateLimit-Policy']).toBe('"second";q=10;w=1, "monthly";q=1;w=2592000')
    const t = Math.ceil(monthly.retryAfterMs / 1000)
    expect(h.RateLimit).toMatch(new RegExp(`^"second";r=9;t=\\d+, "monthly";r=0;t=${t}$`))
    expect(h['Retry-After']).toBe(String(t))
    // the real end: no later than the longest month (31 days and a DST hour) from now
    expect(monthly.retryAfterMs).toBeLessThanOrEqual((31 * 24 + 1) * 3_600_000)
  })
})
