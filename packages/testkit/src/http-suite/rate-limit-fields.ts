/** What the suite expects of RateLimit fields and problem bodies, as patterns and names. */
import type { SuiteResponse } from './types'

/** The RateLimit field names any format may send. */
const RATE_LIMIT_FIELDS = [
  'ratelimit',
  'ratelimit-policy',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
]
export const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
export const REDUCED_CAPACITY = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity'
/** A partition key: sixteen base64 characters. */
export const PK = '[A-Za-z0-9+/]{16}'

/** The RateLimit fields a response carries, whatever the format. */
export function rateLimitFields(res: SuiteResponse): string[] {
  return RATE_LIMIT_FIELDS.filter((name) => res.headers[name] !== undefined)
}

/** `"name";q=..;w=..;pk=:..:` with any pk, captured. */
export function policyItem(name: string, q: number, w: number): string {
  return `"${name}";q=${q};w=${w};pk=:(${PK}):`
}
/** `"name";r=..;t=..;pk=:..:` with any pk, captured. */
export function limitItem(name: string, r: number, t: number): string {
  return `"${name}";r=${r};t=${t};pk=:(${PK}):`
}
/** The whole field value, nothing around it. */
export function exact(pattern: string): RegExp {
  return new RegExp(`^${pattern}$`)
}
