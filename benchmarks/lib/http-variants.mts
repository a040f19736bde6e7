/**
 * The variants of the HTTP benchmark, shared by the orchestrator (`benchmarks/http.mts`) and the server
 * processes (`http-server.mts`). Every variant serves one route, `GET /hello` answering `{"hello":"world"}`.
 * @module
 */

export type Variant = 'bare' | 'tollgate' | 'peer' | 'refused' | 'tollgate-10k' | 'peer-10k'

/**
 * Run order within a round: the three compared variants alternate, then the refused client, then the
 * identity-header pair (every request names one of {@link IDENTITIES} identities in {@link IDENTITY_HEADER},
 * and a `key` function on both sides reads it).
 */
export const VARIANTS: readonly Variant[] = [
  'bare',
  'tollgate',
  'peer',
  'refused',
  'tollgate-10k',
  'peer-10k',
]

/** The header the `-10k` variants key on, and how many distinct values the load generator sends. */
export const IDENTITY_HEADER = 'x-identity'
export const IDENTITIES = 10_000

/** Whether a variant keys on {@link IDENTITY_HEADER} (else on the client address: one client). */
export function keyedOnHeader(v: Variant): boolean {
  return v === 'tollgate-10k' || v === 'peer-10k'
}

/** Limit of the admitting variants: nothing is ever refused, so the cost measured is the limiter's work. */
export const HIGH_LIMIT = 50_000_000 // never reached in a run; sliding-window allows at most 2^26 - 1
export const HIGH_WINDOW_MS = 60_000
/** The refused client: limit 1 per hour, so after its first request everything is a 429. */
export const REFUSED_LIMIT = 1
export const REFUSED_WINDOW_MS = 3_600_000

export const PATH = '/hello'

/** The status every measured response of the variant must have. */
export function expectedStatus(v: Variant): 200 | 429 {
  return v === 'refused' ? 429 : 200
}

/**
 * What a server process counts: the limiter events of a Tollgate server (see `RateLimiter`'s `onEvent`;
 * zeros for the others) and its CPU time (`process.cpuUsage()`, user + system, microseconds).
 */
export interface ServerEvents {
  'cache-hit': number
  fallback: number
  timeout: number
  'store-error': number
  cpuUs: number
}

export function emptyEvents(): ServerEvents {
  return { 'cache-hit': 0, fallback: 0, timeout: 0, 'store-error': 0, cpuUs: 0 }
}
