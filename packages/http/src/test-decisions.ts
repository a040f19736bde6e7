/**
 * Decisions built the way the limiter builds them, for the tests of the header values and problem
 * bodies (no store involved: these are pure functions of a decision).
 */
import type { Algorithm, Decision, PolicyDecision } from '@tollgate/core'

export function pair(overrides: Partial<PolicyDecision> & Pick<PolicyDecision, 'policy'>): PolicyDecision {
  return {
    key: 'user:42',
    algorithm: 'fixed-window' as Algorithm,
    allowed: true,
    limit: 10,
    windowMs: 1000,
    remaining: 9,
    resetMs: 1000,
    retryAfterMs: 0,
    ...overrides,
  }
}

/** A decision built the way the limiter builds one: the binding pair's numbers on top. */
export function decide(policies: PolicyDecision[], source: Decision['source'] = 'store'): Decision {
  const refused = policies.filter((p) => !p.allowed)
  const binding =
    refused.length > 0
      ? refused.reduce((a, b) => (b.retryAfterMs > a.retryAfterMs ? b : a))
      : policies.length > 0
        ? policies.reduce((a, b) => (b.remaining < a.remaining ? b : a))
        : undefined
  return {
    allowed: refused.length === 0,
    limit: binding?.limit ?? 0,
    remaining: binding?.remaining ?? 0,
    resetMs: binding?.resetMs ?? 0,
    retryAfterMs: refused.length === 0 ? 0 : binding!.retryAfterMs, // a refused policy binds
    cost: 1,
    policies,
    binding: binding === undefined ? -1 : policies.indexOf(binding),
    source,
  }
}

// The -10 worked example: 10 req/s burst + 1000 req/day.
export const burst = pair({ policy: 'burst', limit: 10, windowMs: 1000, remaining: 9, resetMs: 1000 })
export const daily = pair({
  policy: 'daily',
  algorithm: 'sliding-window',
  limit: 1000,
  windowMs: 86_400_000,
  remaining: 812,
  resetMs: 40_320_001,
})
export const example = decide([burst, daily])
