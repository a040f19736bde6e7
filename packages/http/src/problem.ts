/**
 * The RFC 9457 problem details bodies of a refused request (429, 503, 400, 500), the same from every
 * adapter.
 * @module
 */
import type { Decision } from '@tollgate/core'
import { retryAfterSeconds } from './headers'

/**
 * An RFC 9457 problem details body (send as `application/problem+json`).
 * @example
 * const body: ProblemDetails = { type: QUOTA_EXCEEDED_TYPE, title: '…', status: 429, 'violated-policies': ['daily'] }
 */
export interface ProblemDetails {
  readonly type: string
  readonly title: string
  readonly status: number
  readonly detail?: string
  /** Names of the policies whose quota was exceeded (draft-ietf-httpapi-ratelimit-headers problem types). */
  readonly 'violated-policies'?: readonly string[]
}

/**
 * Content type of the problem bodies (400, 429, 503), the same from every adapter. With the charset:
 * Fastify appends one to any JSON type that lacks it, so the others send it too (JSON is UTF-8 anyway).
 */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8'

/**
 * Problem type for 429: a quota was exceeded.
 * @example
 * problemDetails(decision).type === QUOTA_EXCEEDED_TYPE // true
 */
export const QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
/**
 * Problem type for 503: the limiter cannot decide (store down, policy `deny`).
 * @example
 * unavailableProblem(5000).type === TEMPORARY_REDUCED_CAPACITY_TYPE // true
 */
export const TEMPORARY_REDUCED_CAPACITY_TYPE =
  'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity'

const QUOTA_EXCEEDED_TITLE = 'Request cannot be satisfied as assigned quota has been exceeded'
const TEMPORARY_REDUCED_CAPACITY_TITLE =
  'Request cannot be satisfied due to temporary server capacity constraints'

/**
 * The RFC 9457 body for a 429: the `quota-exceeded` problem type with the names of the refusing
 * policies in `violated-policies`, in declaration order.
 *
 * @example
 * problemDetails(decision)
 * // { type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
 * //   title: 'Request cannot be satisfied as assigned quota has been exceeded',
 * //   status: 429, 'violated-policies': ['daily'] }
 */
export function problemDetails(decision: Decision): ProblemDetails {
  const violated: string[] = []
  for (const p of decision.policies) if (!p.allowed) violated.push(p.policy)
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: QUOTA_EXCEEDED_TITLE,
    status: 429,
    'violated-policies': violated,
  }
}

/** The JSON text of 429 bodies with one refusing policy, by its name: built once, not per refusal. */
const quotaExceededTexts = new Map<string, string>()
const QUOTA_EXCEEDED_TEXTS_MAX = 256

/**
 * `JSON.stringify(problemDetails(decision))`: the text of a 429 body. With one refusing policy (the
 * usual refusal) it is the same for every refusal of that policy, so it is kept rather than rebuilt.
 * @internal
 */
export function problemDetailsText(decision: Decision): string {
  let name: string | undefined
  for (const p of decision.policies) {
    if (p.allowed) continue
    if (name !== undefined) return JSON.stringify(problemDetails(decision))
    name = p.policy
  }
  if (name === undefined) return JSON.stringify(problemDetails(decision))
  let text = quotaExceededTexts.get(name)
  if (text === undefined) {
    text = JSON.stringify(problemDetails(decision))
    if (quotaExceededTexts.size >= QUOTA_EXCEEDED_TEXTS_MAX) quotaExceededTexts.clear()
    quotaExceededTexts.set(name, text)
  }
  return text
}

/**
 * The RFC 9457 body for a 503 when the limiter cannot decide (store down, failure policy `deny`): the
 * `temporary-reduced-capacity` problem type. Send `Retry-After: retryAfterSeconds(retryAfterMs)` with it.
 *
 * @param retryAfterMs when to try again; adds a human-readable `detail` when finite.
 * @example
 * unavailableProblem(5000)
 * // { type: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
 * //   title: 'Request cannot be satisfied due to temporary server capacity constraints',
 * //   status: 503, detail: 'Retry after 5 seconds.' }
 */
export function unavailableProblem(retryAfterMs?: number): ProblemDetails {
  const seconds = retryAfterMs === undefined ? undefined : retryAfterSeconds(retryAfterMs)
  if (seconds === undefined) {
    return { type: TEMPORARY_REDUCED_CAPACITY_TYPE, title: TEMPORARY_REDUCED_CAPACITY_TITLE, status: 503 }
  }
  return {
    type: TEMPORARY_REDUCED_CAPACITY_TYPE,
    title: TEMPORARY_REDUCED_CAPACITY_TITLE,
    status: 503,
    detail: `Retry after ${seconds} ${seconds === 1 ? 'second' : 'seconds'}.`,
  }
}

/**
 * The body for a 500: an app function (`key`, `cost`, `limits`, `limiter`) answered a value the limiter
 * refuses. No `detail`: the value and the app's internals are for the server's log, not the client.
 */
export const INTERNAL_ERROR_PROBLEM: ProblemDetails = Object.freeze({
  type: 'about:blank',
  title: 'Internal Server Error',
  status: 500,
})

/** The body for a 400: per-request input the limiter refuses (`detail` says which and why). */
export function badRequestProblem(detail: string): ProblemDetails {
  return { type: 'about:blank', title: 'Bad Request', status: 400, detail }
}
