/**
 * RateLimit-Policy items of real limiter decisions: a concurrency policy's (no window, its own quota
 * unit), and the item cache, which stays bounded however many per-call limits one policy takes.
 */
import { MemoryStore, RateLimiter } from '@tollgate/core'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { policyItemCacheSize, rateLimitHeaders } from './headers'

it('concurrency: qu="concurrent-requests", no window; t only when refused', async () => {
  const limiter = new RateLimiter({
    store: new MemoryStore(),
    prefix: uniquePrefix('conc'),
    policies: { rate: { limit: 10, window: '1m' }, inflight: { concurrency: 1, lease: '30s' } },
  })
  const ok = await limiter.consume('k')
  const h = rateLimitHeaders(ok, { format: 'ietf', partitionKey: false })
  expect(h['RateLimit-Policy']).toBe('"rate";q=10;w=60, "inflight";q=1;qu="concurrent-requests"')
  expect(h.RateLimit).toMatch(/^"rate";r=9;t=\d+, "inflight";r=0$/)
  const busy = await limiter.consume('k')
  const refused = rateLimitHeaders(busy, { format: 'ietf', partitionKey: false })
  expect(refused.RateLimit).toMatch(/^"rate";r=9;t=\d+, "inflight";r=0;t=(30|29)$/)
  expect(Number(refused['Retry-After'])).toBeGreaterThanOrEqual(29)
  expect(Number(refused['Retry-After'])).toBeLessThanOrEqual(30)
})

it('the RateLimit-Policy cache is bounded however many limits one policy takes', () => {
  const policy = {
    policy: 'plan',
    key: 'k',
    algorithm: 'gcra' as const,
    allowed: true,
    windowMs: 60_000,
    remaining: 1,
    resetMs: 0,
    retryAfterMs: 0,
  }
  for (let limit = 1; limit <= 5000; limit++) {
    const decision = {
      allowed: true,
      binding: 0,
      limit,
      remaining: 1,
      resetMs: 0,
      retryAfterMs: 0,
      cost: 1,
      policies: [{ ...policy, limit }],
      source: 'store' as const,
    }
    const h = rateLimitHeaders(decision, { format: 'ietf', partitionKey: false })
    expect(h['RateLimit-Policy']).toBe(`"plan";q=${limit};w=60`)
  }
  const size = policyItemCacheSize()
  expect(size.items).toBeLessThanOrEqual(256 * 64)
  expect(size.items).toBeLessThanOrEqual(size.names * 64)
})
