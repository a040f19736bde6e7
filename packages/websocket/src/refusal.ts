/**
 * What a refused connection or message gets: a JSON frame for a message, close code 4429 with the same
 * JSON as its reason for a connection (or HTTP 429 when refused before the upgrade). Never a silent drop.
 * @module
 */
import type { Decision } from '@tollgate/core'

/** The close code of a connection refused or ended by the limit (4000-4999: private use, as 429). */
export const CLOSE_CODE = 4429

/** The reply to a refused message, and the close reason of a refused connection (as JSON). */
export interface RateLimitedFrame {
  type: 'rate_limited'
  /** Milliseconds until the same message or connection can succeed; null when it never can. */
  retryAfterMs: number | null
}

/** The frame for a refusal. A refusal from an unavailable store still asks for a pause of a second. */
export function rateLimitedFrame(decision: Decision): RateLimitedFrame {
  const unavailable = decision.source === 'fallback' && decision.policies.length === 0
  const ms = decision.retryAfterMs
  const retryAfterMs = unavailable ? Math.max(1000, ms) : Number.isFinite(ms) ? ms : null
  return { type: 'rate_limited', retryAfterMs }
}
