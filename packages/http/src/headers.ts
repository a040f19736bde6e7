/**
 * Rate-limit response fields as a plain `Record<name, value>`, framework-free. See `docs/headers.md`.
 *
 * Names are returned in their canonical Title-Case spelling (`RateLimit-Policy`, `RateLimit`,
 * `Retry-After`, `RateLimit-Limit`, `X-RateLimit-Reset`, ...). HTTP field names are case-insensitive and
 * HTTP/2+ lower-cases them on the wire, so adapters pass the record to `setHeader`/`header()` as is.
 *
 * Every value is an RFC 9651 Structured Field in canonical serialisation (no space after `;`, `, `
 * between list members) or an RFC 9110 delay-seconds integer. All times are whole seconds rounded up,
 * so a client that honours them never comes back early.
 * @module
 */
import type { Decision, PolicyDecision } from '@tollgate/core'
import { type PartitionKeyFn, resolvePk } from './partition-key'
import { boundedMs, ceilSeconds, sfInteger, sfString, windowSeconds } from './structured-fields'

/**
 * Which family of RateLimit fields to send. `false` sends none of them (Retry-After is separate).
 * @example
 * const format: HeaderFormat = 'ietf' // RateLimit-Policy: "burst";q=10;w=1, …
 */
export type HeaderFormat = 'ietf' | 'draft-7' | 'draft-6' | false

/** The `headers` formats, for the option check. */
export const HEADER_FORMATS: readonly HeaderFormat[] = ['ietf', 'draft-7', 'draft-6', false]

/**
 * Options of {@link rateLimitHeaders}.
 * @example
 * const opts: RateLimitHeaderOptions = { format: 'ietf', legacy: false, partitionKey: true }
 */
export interface RateLimitHeaderOptions {
  /**
   * `'ietf'`: `RateLimit-Policy` + `RateLimit` in the named-policy syntax of
   * draft-ietf-httpapi-ratelimit-headers-08 to -11, one item per policy.
   * `'draft-7'`: `RateLimit-Policy` + the `RateLimit` dictionary (`limit=, remaining=, reset=`).
   * `'draft-6'`: `RateLimit-Policy` + `RateLimit-Limit` / `-Remaining` / `-Reset`.
   * `false`: no RateLimit fields.
   */
  format: HeaderFormat
  /**
   * Also send `X-RateLimit-Limit` / `-Remaining` / `-Reset` (Reset in epoch seconds, the GitHub and
   * express-rate-limit convention).
   * @default false
   */
  legacy?: boolean
  /**
   * Add `pk` (partition key) to every `'ietf'` item: by default `partitionKey`, 16 base64 chars of
   * SHA-256 of the policy's key, never the key itself. Pass a function to use your own (e.g. an HMAC with
   * a server secret, if keys are guessable and responses may be seen by third parties).
   * @default true
   */
  partitionKey?: boolean | PartitionKeyFn
  /**
   * Send `Retry-After` when the decision refuses the call (and the call can ever succeed).
   * @default true
   */
  retryAfter?: boolean
  /**
   * Clock for the legacy epoch `X-RateLimit-Reset`, in ms since the epoch. Only legacy headers use it;
   * every other value is relative.
   * @default Date.now()
   */
  nowMs?: number
}

/** Policy names as sf-strings: a name is checked and quoted once, not on every response. */
const quotedNames = new Map<string, string>()
function quotedName(name: string): string {
  let quoted = quotedNames.get(name)
  if (quoted === undefined) {
    quoted = sfString(name)
    if (quotedNames.size >= POLICY_ITEM_CACHE_MAX) quotedNames.clear()
    quotedNames.set(name, quoted)
  }
  return quoted
}

/**
 * Cache of `"name";q=<limit>;w=<window>` (or `;qu="concurrent-requests"`) per policy name and, under it,
 * per limit: with per-call limits (plans, tenants) one policy name takes a few values in turn, each kept
 * rather than rebuilt. Bounded: at most 256 names and 64 limits per name (a full level starts over).
 */
const policyItemCache = new Map<string, { windowMs: number; lease: boolean; byLimit: Map<number, string> }>()
const POLICY_ITEM_CACHE_MAX = 256
const POLICY_ITEM_LIMITS_MAX = 64

function policyItem(p: PolicyDecision): string {
  let cached = policyItemCache.get(p.policy)
  const lease = p.algorithm === 'concurrency'
  if (cached === undefined || cached.windowMs !== p.windowMs || cached.lease !== lease) {
    if (policyItemCache.size >= POLICY_ITEM_CACHE_MAX) policyItemCache.clear()
    cached = { windowMs: p.windowMs, lease, byLimit: new Map() }
    policyItemCache.set(p.policy, cached)
  }
  let text = cached.byLimit.get(p.limit)
  if (text === undefined) {
    // A concurrency limit has no window: its quota unit says what `q` counts (its lease stays private).
    text = lease
      ? `${quotedName(p.policy)};q=${sfInteger(p.limit)};qu=${CONCURRENT_REQUESTS}`
      : `${quotedName(p.policy)};q=${sfInteger(p.limit)};w=${windowSeconds(p.windowMs)}`
    if (cached.byLimit.size >= POLICY_ITEM_LIMITS_MAX) cached.byLimit.clear()
    cached.byLimit.set(p.limit, text)
  }
  return text
}

/** @internal How many RateLimit-Policy items are cached (names, and items over every name): tests. */
export function policyItemCacheSize(): { names: number; items: number } {
  let items = 0
  for (const c of policyItemCache.values()) items += c.byLimit.size
  return { names: policyItemCache.size, items }
}

/** The draft's quota unit of a concurrency limit (`qu`), as an sf-string. */
const CONCURRENT_REQUESTS = '"concurrent-requests"'

/**
 * The `'ietf'` `RateLimit-Policy` value: one Quota Policy Item per policy decision, in order.
 * `q` = the policy's limit, `w` = its window in whole seconds (rounded up, at least 1). A concurrency
 * policy has `qu="concurrent-requests"` and no `w`: `"inflight";q=5;qu="concurrent-requests"`.
 *
 * @param pkFor adds `pk=:<pkFor(key)>:` to each item; omit for none.
 * @example
 * policyHeaderValue(decision.policies)
 * // '"burst";q=10;w=1, "daily";q=1000;w=86400'
 * policyHeaderValue(decision.policies, partitionKey)
 * // '"burst";q=10;w=1;pk=:…:, "daily";q=1000;w=86400;pk=:…:'
 */
export function policyHeaderValue(policies: readonly PolicyDecision[], pkFor?: PartitionKeyFn): string {
  let out = ''
  for (let i = 0; i < policies.length; i++) {
    const p = policies[i]!
    if (i > 0) out += ', '
    out += policyItem(p)
    if (pkFor !== undefined) out += `;pk=:${pkFor(p.key)}:`
  }
  return out
}

/**
 * The `'ietf'` `RateLimit` value: one Service Limit Item per policy decision, in order.
 * `r` = units left; `t` = {@link effectiveSeconds}.
 *
 * @param pkFor adds `pk=:<pkFor(key)>:` to each item; omit for none.
 * @example
 * rateLimitHeaderValue(decision.policies)
 * // '"burst";r=9;t=1, "daily";r=812;t=40321'
 */
export function rateLimitHeaderValue(policies: readonly PolicyDecision[], pkFor?: PartitionKeyFn): string {
  let out = ''
  for (let i = 0; i < policies.length; i++) {
    const p = policies[i]!
    if (i > 0) out += ', '
    out += serviceItem(p)
    if (pkFor !== undefined) out += `;pk=:${pkFor(p.key)}:`
  }
  return out
}

/** One policy's `RateLimit` item without `pk`: `"name";r=<remaining>;t=<seconds>`. */
function serviceItem(p: PolicyDecision): string {
  // An admitted concurrency item has no `t`: a slot comes back when a request in flight ends.
  return !p.allowed || p.algorithm !== 'concurrency'
    ? `${quotedName(p.policy)};r=${sfInteger(p.remaining)};t=${effectiveSeconds(p)}`
    : `${quotedName(p.policy)};r=${sfInteger(p.remaining)}`
}

/**
 * The `t` of one policy decision, in whole seconds rounded up:
 * - refused: its `retryAfterMs` (at least 1), i.e. when a call of the same cost can succeed; when the
 *   cost can never be granted (`Infinity`), the policy's window `w`;
 * - allowed: its `resetMs`, i.e. when its quota is fully restored if nothing more is spent.
 *
 * @example
 * effectiveSeconds({ allowed: true, resetMs: 40_320_001, ... })  // 40321
 * effectiveSeconds({ allowed: false, retryAfterMs: 1, ... })     // 1
 */
export function effectiveSeconds(p: PolicyDecision): number {
  if (p.allowed) return ceilSeconds(p.resetMs)
  if (p.retryAfterMs === Infinity) return windowSeconds(p.windowMs)
  return Math.max(1, ceilSeconds(p.retryAfterMs))
}

/**
 * `Retry-After` in whole seconds for a refused decision, or for a plain wait in milliseconds (e.g. a
 * 503 while the store is down): rounded up, at least 1, and never below the `t` of any refusing policy.
 *
 * @returns `undefined` when the decision is allowed, or when the call can never succeed
 * (`retryAfterMs: Infinity`, the cost exceeds the policy's capacity): waiting would not help, so no
 * Retry-After is sent, and clients do not loop.
 * @example
 * retryAfterSeconds(decision) // decision.retryAfterMs 1001 -> 2
 * retryAfterSeconds(1)        // 1
 * retryAfterSeconds(Infinity) // undefined
 */
export function retryAfterSeconds(decisionOrMs: Decision | number): number | undefined {
  let ms: number
  if (typeof decisionOrMs === 'number') {
    ms = decisionOrMs
  } else {
    if (decisionOrMs.allowed) return undefined
    ms = decisionOrMs.retryAfterMs
    const policies = decisionOrMs.policies
    for (let i = 0; i < policies.length; i++) {
      const p = policies[i]!
      if (!p.allowed && p.retryAfterMs > ms) ms = p.retryAfterMs
    }
  }
  if (ms === Infinity) return undefined
  return Math.max(1, ceilSeconds(ms))
}

/**
 * The fields for a decision, as `{ name: value }`. Empty when `decision.policies` is empty (e.g. a
 * store-failure `'fallback'` decision that let the call through): quota that was not measured is never
 * advertised.
 *
 * @example
 * rateLimitHeaders(decision, { format: 'ietf', partitionKey: false })
 * // {
 * //   'RateLimit-Policy': '"burst";q=10;w=1, "daily";q=1000;w=86400',
 * //   RateLimit: '"burst";r=9;t=1, "daily";r=812;t=40321',
 * // }
 */
export function rateLimitHeaders(decision: Decision, opts: RateLimitHeaderOptions): Record<string, string> {
  const headers: Record<string, string> = {}
  const policies = decision.policies
  if (policies.length > 0) {
    const format = opts.format
    if (format === 'ietf') {
      const pkFor = resolvePk(opts.partitionKey)
      if (policies.length === 1) {
        // The usual decision: both fields in one pass, the key hashed (or looked up) once.
        const p = policies[0]!
        const pk = pkFor === undefined ? '' : `;pk=:${pkFor(p.key)}:`
        headers['RateLimit-Policy'] = policyItem(p) + pk
        headers.RateLimit = serviceItem(p) + pk
      } else {
        headers['RateLimit-Policy'] = policyHeaderValue(policies, pkFor)
        headers.RateLimit = rateLimitHeaderValue(policies, pkFor)
      }
    } else if (format === 'draft-7' || format === 'draft-6') {
      const binding = policies[decision.binding]! // with policies, binding indexes one of them
      const limit = sfInteger(decision.limit)
      const remaining = sfInteger(decision.remaining)
      const reset = decision.allowed
        ? ceilSeconds(decision.resetMs)
        : decision.retryAfterMs === Infinity
          ? windowSeconds(binding.windowMs)
          : Math.max(1, ceilSeconds(decision.retryAfterMs))
      headers['RateLimit-Policy'] = `${limit};w=${windowSeconds(binding.windowMs)}`
      if (format === 'draft-7') {
        headers.RateLimit = `limit=${limit}, remaining=${remaining}, reset=${reset}`
      } else {
        headers['RateLimit-Limit'] = String(limit)
        headers['RateLimit-Remaining'] = String(remaining)
        headers['RateLimit-Reset'] = String(reset)
      }
    } else if (format !== false) {
      throw new TypeError(
        `headers format must be 'ietf', 'draft-7', 'draft-6' or false, received ${JSON.stringify(format)}`,
      )
    }
    if (opts.legacy === true) {
      const now = opts.nowMs ?? Date.now()
      headers['X-RateLimit-Limit'] = String(sfInteger(decision.limit))
      headers['X-RateLimit-Remaining'] = String(sfInteger(decision.remaining))
      headers['X-RateLimit-Reset'] = String(Math.ceil((now + boundedMs(decision.resetMs)) / 1000))
    }
  }
  if (opts.retryAfter !== false && !decision.allowed) {
    const seconds = retryAfterSeconds(decision)
    if (seconds !== undefined) headers['Retry-After'] = String(seconds)
  }
  return headers
}
