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
import { base64, sha256 } from '../hash'
import type { Decision, PolicyDecision } from '../types'

/**
 * Which family of RateLimit fields to send. `false` sends none of them (Retry-After is separate).
 * @example
 * const format: HeaderFormat = 'ietf' // RateLimit-Policy: "burst";q=10;w=1, …
 */
export type HeaderFormat = 'ietf' | 'draft-7' | 'draft-6' | false

/**
 * Computes the partition key of an identity: the base64 text that goes between the colons of `pk=:…:`.
 * @example
 * const pkFor: PartitionKeyFn = (key) => myHmacBase64(secret, key)
 */
export type PartitionKeyFn = (key: string) => string

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
   * Add `pk` (partition key) to every `'ietf'` item: by default {@link partitionKey}, 16 base64 chars of
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

/** Largest sf-integer (RFC 9651 §3.3.1: at most 15 digits). */
const SF_INTEGER_MAX = 999_999_999_999_999

/** Bytes of SHA-256 kept for `pk`: 96 bits, 16 base64 chars without padding. */
const PK_BYTES = 12
/**
 * Partition keys of recent identities: hashing is the expensive part of the headers (a SHA-256 in
 * JavaScript per response: 2 % of a Hono server's CPU with 10,000 identities and a 1,024-entry cache).
 * Comfortably above the deny cache's 10,000 default, so a server's active identities stay in it (a FIFO
 * one entry too small for identities that come round in turn misses every time): at most ~5 MB with keys
 * of 256 bytes, ~1 MB with typical ones.
 */
const PK_CACHE_MAX = 16_384
/** Identities longer than this are hashed every time rather than kept alive in the cache. */
const PK_CACHE_MAX_KEY = 256
const pkCache = new Map<string, string>()

/**
 * The `'ietf'` partition key of an identity: base64 of the first 12 bytes of its SHA-256 (16 chars). It
 * lets a client tell partitions apart without revealing the key. It is not a secret: an identity from a
 * small space (an IPv4 address) can be recovered by trying every candidate.
 *
 * @example
 * partitionKey('ip:1.2.3.4') // 16 base64 chars, the same for every call with this key
 */
export function partitionKey(key: string): string {
  let pk = pkCache.get(key)
  if (pk !== undefined) return pk
  pk = base64(sha256(key).subarray(0, PK_BYTES))
  if (key.length <= PK_CACHE_MAX_KEY) {
    // Insertion order makes this FIFO: cheap, bounded, and hot clients are re-added on their next miss.
    if (pkCache.size >= PK_CACHE_MAX) pkCache.delete(pkCache.keys().next().value as string)
    pkCache.set(key, pk)
  }
  return pk
}

/**
 * Serialises text as an RFC 9651 sf-string: in double quotes, with `"` and `\` escaped.
 *
 * @throws TypeError for characters an sf-string cannot hold (controls, non-ASCII). Policy names are
 * validated at construction, so this only fires on a bug; an invalid field is never emitted.
 * @example
 * sfString('burst')   // '"burst"'
 * sfString('a"b\\c')  // '"a\\"b\\\\c"'
 */
export function sfString(text: string): string {
  let plain = true
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x20 || c > 0x7e) {
      throw new TypeError(
        `${JSON.stringify(text)} cannot be sent as a Structured Field string (printable ASCII only)`,
      )
    }
    if (c === 0x22 || c === 0x5c) plain = false
  }
  if (plain) return `"${text}"`
  let out = '"'
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    out += ch === '"' || ch === '\\' ? `\\${ch}` : ch
  }
  return `${out}"`
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

function resolvePk(pk: boolean | PartitionKeyFn | undefined): PartitionKeyFn | undefined {
  if (pk === undefined || pk === true) return partitionKey
  return pk === false ? undefined : pk
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
    const p = policies[i]
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
    const p = policies[i]
    if (i > 0) out += ', '
    out += `${quotedName(p.policy)};r=${sfInteger(p.remaining)}`
    // An admitted concurrency item has no `t`: a slot comes back when a request in flight ends.
    if (!p.allowed || p.algorithm !== 'concurrency') out += `;t=${effectiveSeconds(p)}`
    if (pkFor !== undefined) out += `;pk=:${pkFor(p.key)}:`
  }
  return out
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
      const p = policies[i]
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
      headers['RateLimit-Policy'] = policyHeaderValue(policies, pkFor)
      headers.RateLimit = rateLimitHeaderValue(policies, pkFor)
    } else if (format === 'draft-7' || format === 'draft-6') {
      const binding = policies[decision.binding]
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

/** Milliseconds to whole seconds, rounded up; NaN and negatives are 0; capped to an sf-integer. */
function ceilSeconds(ms: number): number {
  if (!(ms > 0)) return 0
  const s = Math.ceil(ms / 1000)
  return Math.min(s, SF_INTEGER_MAX)
}

/** A window in whole seconds: rounded up, at least 1 (the drafts have no sub-second windows). */
function windowSeconds(ms: number): number {
  return Math.max(1, ceilSeconds(ms))
}

/** A count as a non-negative sf-integer (rounded down, so remaining quota is never overstated). */
function sfInteger(n: number): number {
  if (!(n > 0)) return 0
  const v = Math.floor(n)
  return Math.min(v, SF_INTEGER_MAX)
}

/** A duration for arithmetic: NaN and negatives are 0, Infinity is capped (no `Infinity` in a header). */
function boundedMs(ms: number): number {
  return Math.min(Math.max(0, ms || 0), SF_INTEGER_MAX)
}
