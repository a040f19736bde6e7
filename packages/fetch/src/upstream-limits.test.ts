import { durationMs, upstreamLimits } from './upstream-limits'

const NOW = Date.parse('2026-01-01T00:00:00Z')

describe('upstreamLimits', () => {
  it("reads OpenAI's x-ratelimit-*-requests and -tokens", () => {
    const headers = new Headers({
      'x-ratelimit-limit-requests': '500',
      'x-ratelimit-remaining-requests': '499',
      'x-ratelimit-reset-requests': '120ms',
      'x-ratelimit-limit-tokens': '30000',
      'x-ratelimit-remaining-tokens': '29000',
      'x-ratelimit-reset-tokens': '6m0s',
    })
    expect(upstreamLimits(headers, NOW)).toEqual({
      requests: { remaining: 499, limit: 500, resetMs: 120 },
      tokens: { remaining: 29000, limit: 30000, resetMs: 360_000 },
    })
  })

  it('reads Retry-After as seconds or as an HTTP date', () => {
    expect(upstreamLimits(new Headers({ 'retry-after': '7' }), NOW)).toEqual({ retryAfterMs: 7000 })
    const date = new Date(NOW + 30_000).toUTCString()
    expect(upstreamLimits(new Headers({ 'retry-after': date }), NOW)).toEqual({ retryAfterMs: 30_000 })
    expect(upstreamLimits(new Headers({ 'retry-after': 'soon' }), NOW)).toEqual({})
  })

  it('reads the IETF RateLimit field, with quotas from RateLimit-Policy; the least remaining wins', () => {
    const headers = new Headers({
      'ratelimit-policy': '"burst";q=10;w=1, "daily";q=1000;w=86400, "tokens";q=5000;w=60',
      ratelimit: '"burst";r=9;t=1, "daily";r=3;t=40321, "tokens";r=4000;t=20',
    })
    expect(upstreamLimits(headers, NOW)).toEqual({
      requests: { remaining: 3, limit: 10, resetMs: 40_321_000 },
      tokens: { remaining: 4000, limit: 5000, resetMs: 20_000 },
    })
  })

  it("reads draft-7's RateLimit dictionary, draft-6's fields and X-RateLimit-*", () => {
    expect(upstreamLimits(new Headers({ ratelimit: 'limit=10, remaining=2, reset=5' }), NOW)).toEqual({
      requests: { remaining: 2, limit: 10, resetMs: 5000 },
    })
    const draft6 = new Headers({
      'ratelimit-limit': '10',
      'ratelimit-remaining': '4',
      'ratelimit-reset': '3',
    })
    expect(upstreamLimits(draft6, NOW)).toEqual({ requests: { remaining: 4, limit: 10, resetMs: 3000 } })
    // GitHub's reset is a Unix time
    const github = new Headers({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(NOW / 1000 + 60) })
    expect(upstreamLimits(github, NOW)).toEqual({ requests: { remaining: 0, resetMs: 60_000 } })
  })

  it('ignores what it cannot read', () => {
    const headers = new Headers({ 'x-ratelimit-remaining-requests': '-1', ratelimit: 'garbage;;=,' })
    expect(upstreamLimits(headers, NOW)).toEqual({})
  })
})

describe('durationMs', () => {
  it.each([
    ['6m0s', 360_000],
    ['1s', 1000],
    ['20ms', 20],
    ['1h2m3.5s', 3_723_500],
    ['2', 2000],
    ['0.5', 500],
  ])('%s is %d ms', (text, ms) => expect(durationMs(text)).toBe(ms))
  it.each(['', 'soon', '5x', '-1s'])('%j is unreadable', (text) => expect(durationMs(text)).toBeUndefined())
})
