/**
 * The tool result a refused call gets: an MCP tool error (`isError: true`), so the model reads why and
 * when to retry, and the session stays up; the numbers for programs under `_meta`.
 * @module
 */

import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { Decision } from '@tollgate/core'

/** The `_meta` key of a refusal's numbers. */
export const META_KEY = 'tollgate/rate-limit'

/** What `_meta['tollgate/rate-limit']` holds on a refused call. */
export interface RateLimitedMeta {
  /** `'unavailable'`: the store failed and the failure policy `'deny'` refused, measuring nothing. */
  code: 'rate_limited' | 'unavailable'
  tool: string
  /** Milliseconds until the same call can succeed; null when its cost can never fit. */
  retryAfterMs: number | null
  /** The same wait in whole seconds, rounded up (null as above). */
  retryAfterSeconds: number | null
  /** The policies that refused, with their numbers. */
  policies: {
    policy: string
    limit: number
    remaining: number
    windowMs: number
    resetMs: number
    retryAfterMs: number | null
  }[]
}

const finite = (ms: number): number | null => (Number.isFinite(ms) ? ms : null)

/** The refusal as a tool result. */
export function refusalResult(tool: string, decision: Decision): CallToolResult {
  const refusing = decision.policies.filter((p) => !p.allowed)
  const unavailable = decision.source === 'fallback' && decision.policies.length === 0
  // an outage refusal with no breaker cool-down yet still asks for a pause, never an immediate retry loop
  const retryAfterMs = unavailable ? Math.max(1000, decision.retryAfterMs) : finite(decision.retryAfterMs)
  const retryAfterSeconds = retryAfterMs === null ? null : Math.ceil(retryAfterMs / 1000)
  const names = refusing.map((p) => `${p.policy} (${p.limit} per ${p.windowMs / 1000} s)`).join(', ')
  const by = names ? ` by ${names}` : unavailable ? ': the rate limiter is unavailable' : ''
  const when =
    retryAfterSeconds === null
      ? 'This call costs more than the budget can ever grant: do not retry it as it is.'
      : `Retry after ${retryAfterSeconds} s (${retryAfterMs} ms).`
  const meta: RateLimitedMeta = {
    code: unavailable ? 'unavailable' : 'rate_limited',
    tool,
    retryAfterMs,
    retryAfterSeconds,
    policies: refusing.map((p) => ({
      policy: p.policy,
      limit: p.limit,
      remaining: p.remaining,
      windowMs: p.windowMs,
      resetMs: p.resetMs,
      retryAfterMs: finite(p.retryAfterMs),
    })),
  }
  return {
    isError: true,
    content: [{ type: 'text', text: `Rate limited: tool '${tool}' refused${by}. ${when}` }],
    _meta: { [META_KEY]: meta },
  }
}
