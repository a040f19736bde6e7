import type { Decision } from '@tollgate/core'
import { at, defined } from '@tollgate/testkit/checked'
import fc from 'fast-check'
import {
  effectiveSeconds,
  policyHeaderValue,
  rateLimitHeaders,
  rateLimitHeaderValue,
  retryAfterSeconds,
} from './headers'
import { burst, daily, decide, example, pair } from './test-decisions'

describe("format 'ietf'", () => {
  it('emits the -10 worked example byte for byte (pk off)', () => {
    expect(rateLimitHeaders(example, { format: 'ietf', partitionKey: false })).toEqual({
      'RateLimit-Policy': '"burst";q=10;w=1, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=9;t=1, "daily";r=812;t=40321',
    })
  })

  it('uses the canonical Title-Case names, in a stable order', () => {
    expect(Object.keys(rateLimitHeaders(example, { format: 'ietf' }))).toEqual([
      'RateLimit-Policy',
      'RateLimit',
    ])
  })

  it('emits the throttled example: daily refused, Retry-After = its t', () => {
    const refusedDaily = { ...daily, allowed: false, remaining: 0, retryAfterMs: 40_320_001 }
    const headers = rateLimitHeaders(decide([burst, refusedDaily]), { format: 'ietf', partitionKey: false })
    expect(headers).toEqual({
      'RateLimit-Policy': '"burst";q=10;w=1, "daily";q=1000;w=86400',
      RateLimit: '"burst";r=9;t=1, "daily";r=0;t=40321',
      'Retry-After': '40321',
    })
  })

  it('rounds every duration up to whole seconds', () => {
    const t = (ms: number, allowed: boolean) =>
      effectiveSeconds(pair({ policy: 'p', allowed, resetMs: ms, retryAfterMs: allowed ? 0 : ms }))
    expect(t(0, true)).toBe(0)
    expect(t(1, true)).toBe(1)
    expect(t(1000, true)).toBe(1)
    expect(t(1001, true)).toBe(2)
    expect(t(1, false)).toBe(1)
    expect(t(1000, false)).toBe(1)
    expect(t(1001, false)).toBe(2)
    const w = (windowMs: number) => policyHeaderValue([pair({ policy: 'p', windowMs })])
    expect(w(1)).toBe('"p";q=10;w=1')
    expect(w(999)).toBe('"p";q=10;w=1')
    expect(w(1000)).toBe('"p";q=10;w=1')
    expect(w(1001)).toBe('"p";q=10;w=2')
    expect(w(86_400_000)).toBe('"p";q=10;w=86400')
  })

  it('uses resetMs for an allowed pair and retryAfterMs for a refused one', () => {
    const tb = pair({ policy: 'tb', algorithm: 'token-bucket', remaining: 3, resetMs: 7000, retryAfterMs: 0 })
    expect(rateLimitHeaderValue([tb])).toBe('"tb";r=3;t=7')
    const refused = { ...tb, allowed: false, remaining: 0, resetMs: 10_000, retryAfterMs: 2500 }
    expect(rateLimitHeaderValue([refused])).toBe('"tb";r=0;t=3')
  })

  it('a cost that can never be granted gets t = w and no Retry-After', () => {
    const never = pair({
      policy: 'p',
      allowed: false,
      windowMs: 60_000,
      remaining: 10,
      resetMs: 0,
      retryAfterMs: Infinity,
    })
    const headers = rateLimitHeaders(decide([never]), { format: 'ietf', partitionKey: false })
    expect(headers).toEqual({ 'RateLimit-Policy': '"p";q=10;w=60', RateLimit: '"p";r=10;t=60' })
  })

  it('escapes policy names as sf-strings', () => {
    const d = decide([pair({ policy: 'a"b\\c' })])
    expect(rateLimitHeaders(d, { format: 'ietf', partitionKey: false })).toEqual({
      'RateLimit-Policy': '"a\\"b\\\\c";q=10;w=1',
      RateLimit: '"a\\"b\\\\c";r=9;t=1',
    })
  })

  it('refuses to emit a name an sf-string cannot hold (header injection)', () => {
    expect(() => rateLimitHeaders(decide([pair({ policy: 'x\ny' })]), { format: 'ietf' })).toThrow(TypeError)
  })

  it('clamps to valid sf-integers (never negative, fractional or over 15 digits)', () => {
    const odd = pair({ policy: 'p', limit: 1e20, remaining: -3, resetMs: Number.NaN, windowMs: -5 })
    expect(policyHeaderValue([odd])).toBe('"p";q=999999999999999;w=1')
    expect(rateLimitHeaderValue([odd])).toBe('"p";r=0;t=0')
    expect(rateLimitHeaderValue([pair({ policy: 'p', remaining: 2.7 })])).toBe('"p";r=2;t=1')
  })

  it('re-renders when a policy with the same name changes its numbers', () => {
    expect(policyHeaderValue([pair({ policy: 'same', limit: 5 })])).toBe('"same";q=5;w=1')
    expect(policyHeaderValue([pair({ policy: 'same', limit: 6 })])).toBe('"same";q=6;w=1')
    expect(policyHeaderValue([pair({ policy: 'same', limit: 6, windowMs: 60_000 })])).toBe('"same";q=6;w=60')
  })
})

describe('Retry-After', () => {
  it('is sent only on refusal', () => {
    expect(rateLimitHeaders(example, { format: 'ietf' })['Retry-After']).toBeUndefined()
    const refused = decide([pair({ policy: 'p', allowed: false, remaining: 0, retryAfterMs: 1 })])
    expect(rateLimitHeaders(refused, { format: 'ietf' })['Retry-After']).toBe('1')
  })

  it.each([
    [1, '1'],
    [999, '1'],
    [1000, '1'],
    [1001, '2'],
    [59_999, '60'],
    [0, '1'], // a refusal with no wait is still "at least 1"
  ])('retryAfterMs %p -> %p', (ms, expected) => {
    const d = decide([pair({ policy: 'p', allowed: false, remaining: 0, retryAfterMs: ms })])
    expect(rateLimitHeaders(d, { format: false })).toEqual({ 'Retry-After': expected })
  })

  it('is never earlier than the largest t of the refusing policies', () => {
    const a = pair({ policy: 'a', allowed: false, remaining: 0, retryAfterMs: 4500 })
    const b = pair({ policy: 'b', allowed: false, remaining: 0, retryAfterMs: 2000 })
    // Even if the decision's own number disagrees with its pairs.
    const d: Decision = { ...decide([a, b]), retryAfterMs: 100 }
    expect(retryAfterSeconds(d)).toBe(5)
  })

  it('property: Retry-After >= every refusing t, >= 1, a whole number', () => {
    const pairArb = fc.record({
      policy: fc.constantFrom('a', 'b', 'c'),
      allowed: fc.boolean(),
      windowMs: fc.integer({ min: 1, max: 10 ** 9 }),
      remaining: fc.nat(1000),
      resetMs: fc.integer({ min: 0, max: 10 ** 9 }),
      retryAfterMs: fc.oneof(
        fc.integer({ min: 1, max: 10 ** 9 }),
        fc.double({ min: 0.001, max: 1e6, noNaN: true }),
      ),
    })
    fc.assert(
      fc.property(fc.array(pairArb, { minLength: 1, maxLength: 4 }), (raw) => {
        const policies = raw.map((p) => pair({ ...p, retryAfterMs: p.allowed ? 0 : p.retryAfterMs }))
        const d = decide(policies)
        const headers = rateLimitHeaders(d, { format: 'ietf', partitionKey: false })
        if (d.allowed) return headers['Retry-After'] === undefined
        const retry = Number(headers['Retry-After'])
        expect(Number.isInteger(retry)).toBe(true)
        expect(retry).toBeGreaterThanOrEqual(1)
        expect(retry).toBeGreaterThanOrEqual(d.retryAfterMs / 1000)
        const items = defined(headers.RateLimit, 'RateLimit').split(', ')
        policies.forEach((p, i) => {
          const t = Number(/;t=(\d+)/.exec(at(items, i))?.[1])
          if (!p.allowed) expect(retry).toBeGreaterThanOrEqual(t)
        })
        return true
      }),
      { numRuns: 1000 },
    )
  })

  it('is omitted when the call can never succeed', () => {
    const never = pair({ policy: 'p', allowed: false, retryAfterMs: Infinity })
    const ok = pair({ policy: 'q', allowed: false, retryAfterMs: 3000 })
    expect(retryAfterSeconds(decide([ok, never]))).toBeUndefined()
    expect(rateLimitHeaders(decide([ok, never]), { format: false })).toEqual({})
  })

  it('can be turned off', () => {
    const d = decide([pair({ policy: 'p', allowed: false, remaining: 0, retryAfterMs: 3000 })])
    expect(rateLimitHeaders(d, { format: false, retryAfter: false })).toEqual({})
  })

  it('retryAfterSeconds also takes plain milliseconds (for a 503)', () => {
    expect(retryAfterSeconds(1)).toBe(1)
    expect(retryAfterSeconds(1000)).toBe(1)
    expect(retryAfterSeconds(1001)).toBe(2)
    expect(retryAfterSeconds(0)).toBe(1)
    expect(retryAfterSeconds(Infinity)).toBeUndefined()
    expect(retryAfterSeconds(example)).toBeUndefined()
  })
})

describe("formats 'draft-7', 'draft-6' and legacy", () => {
  it("'draft-7' reports the binding policy as a dictionary", () => {
    expect(rateLimitHeaders(example, { format: 'draft-7' })).toEqual({
      'RateLimit-Policy': '10;w=1',
      RateLimit: 'limit=10, remaining=9, reset=1',
    })
  })

  it("'draft-6' reports the binding policy in three fields", () => {
    expect(rateLimitHeaders(example, { format: 'draft-6' })).toEqual({
      'RateLimit-Policy': '10;w=1',
      'RateLimit-Limit': '10',
      'RateLimit-Remaining': '9',
      'RateLimit-Reset': '1',
    })
  })

  it('picks the binding policy of a refusal and uses its wait as reset', () => {
    const refusedDaily = { ...daily, allowed: false, remaining: 0, retryAfterMs: 40_320_001 }
    const d = decide([burst, refusedDaily])
    expect(rateLimitHeaders(d, { format: 'draft-7' })).toEqual({
      'RateLimit-Policy': '1000;w=86400',
      RateLimit: 'limit=1000, remaining=0, reset=40321',
      'Retry-After': '40321',
    })
    expect(rateLimitHeaders(d, { format: 'draft-6' })).toMatchObject({
      'RateLimit-Policy': '1000;w=86400',
      'RateLimit-Reset': '40321',
    })
  })

  it('reads the binding pair the decision names, never re-derives it', () => {
    // Two pairs with the same numbers but different windows: only `binding` tells them apart.
    const a = pair({ policy: 'a', windowMs: 1000 })
    const b = pair({ policy: 'b', windowMs: 60_000 })
    const d: Decision = { ...decide([a, b]), binding: 1 }
    expect(rateLimitHeaders(d, { format: 'draft-7' })['RateLimit-Policy']).toBe('10;w=60')
    expect(rateLimitHeaders({ ...d, binding: 0 }, { format: 'draft-6' })['RateLimit-Policy']).toBe('10;w=1')
  })

  it('uses the window as reset when the cost can never be granted', () => {
    const never = pair({ policy: 'p', allowed: false, windowMs: 60_000, retryAfterMs: Infinity })
    expect(rateLimitHeaders(decide([never]), { format: 'draft-7' })).toEqual({
      'RateLimit-Policy': '10;w=60',
      RateLimit: 'limit=10, remaining=9, reset=60',
    })
  })

  it('legacy adds X-RateLimit-* with an epoch-seconds reset', () => {
    const headers = rateLimitHeaders(example, { format: false, legacy: true, nowMs: 1_700_000_000_500 })
    // Binding pair: burst (fewest left), resetMs 1000 -> ceil((1_700_000_000_500 + 1000) / 1000).
    expect(headers).toEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '9',
      'X-RateLimit-Reset': '1700000002',
    })
  })

  it('legacy combines with a standard format and defaults to the current clock', () => {
    const before = Math.floor(Date.now() / 1000)
    const headers = rateLimitHeaders(example, { format: 'ietf', legacy: true, partitionKey: false })
    expect(Object.keys(headers)).toEqual([
      'RateLimit-Policy',
      'RateLimit',
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
    ])
    const reset = Number(headers['X-RateLimit-Reset'])
    expect(reset).toBeGreaterThanOrEqual(before + 1)
    expect(reset).toBeLessThanOrEqual(before + 3)
  })

  it('rejects an unknown format', () => {
    expect(() => rateLimitHeaders(example, { format: 'draft-8' as 'ietf' })).toThrow(
      `headers format must be 'ietf', 'draft-7', 'draft-6' or false, received "draft-8"`,
    )
  })
})

describe('no measured quota, no RateLimit fields', () => {
  const fallback: Decision = {
    allowed: true,
    limit: 0,
    remaining: 0,
    resetMs: 0,
    retryAfterMs: 0,
    cost: 1,
    policies: [],
    binding: -1,
    source: 'fallback',
  }

  it.each(['ietf', 'draft-7', 'draft-6', false] as const)(
    'format %p sends nothing for a fallback pass',
    (format) => {
      expect(rateLimitHeaders(fallback, { format, legacy: true })).toEqual({})
    },
  )

  it('a fallback refusal carries only its Retry-After', () => {
    const denied: Decision = { ...fallback, allowed: false, retryAfterMs: 5000 }
    expect(rateLimitHeaders(denied, { format: 'ietf', legacy: true })).toEqual({ 'Retry-After': '5' })
  })

  it('format false sends no RateLimit fields for a real decision', () => {
    expect(rateLimitHeaders(example, { format: false })).toEqual({})
  })
})
