/**
 * The only place Redis keys are built. Format: `<prefix>:{<identity>}:<policy>:<sig>`
 * (`<prefix>:{<identity>}:<sig>` for a limiter with one inline policy), where `<sig>` is what the state
 * means, `<alg>-<window>` (`sw-1m`): two limiters whose state cannot be read one as the other never
 * share a key, whatever their prefix. Every key of one identity shares a Redis Cluster hash slot, and no
 * brace a client sends can steer the slot, make two identities collide, or grow a key past a fixed bound.
 * @module
 */
import { CALENDAR_NOMINAL_MS, type CalendarUnit, type ResolvedCalendar } from './calendar'
import { ConfigError, InputError } from './errors'
import { base64Url, sha256, utf8 } from './hash'
import type { Algorithm, KeyInput, ResolvedPolicy, StoreEntry } from './types'

/** Identities longer than this many UTF-8 bytes are replaced by their hash. */
export const MAX_IDENTITY_BYTES = 128

/**
 * Marks a hashed identity. Raw identities that start with it are hashed too, so a client cannot send the
 * hashed form of someone else's identity and share their budget.
 */
const HASHED = '~h:'

const PREFIX_OK = /^[\x21-\x7a\x7c\x7e]{1,64}$/ // printable ASCII without '{' (0x7b), '}' (0x7d), space
const POLICY_OK = /^[A-Za-z0-9_.-]{1,64}$/
// Braces choose the hash slot; control bytes and DEL break logs and protocols.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control bytes is the point
const UNSAFE = /[{}\x00-\x1f\x7f]/

/** Validates a key prefix at construction. */
export function validatePrefix(prefix: unknown, option = 'prefix'): string {
  if (typeof prefix !== 'string' || !PREFIX_OK.test(prefix)) {
    throw new ConfigError(
      option,
      'a non-empty printable ASCII string of at most 64 chars without braces or spaces',
      prefix,
    )
  }
  return prefix
}

/** Validates a policy name: it appears in keys and, quoted, in the RateLimit headers. */
export function validatePolicyName(name: string, option: string): string {
  if (!POLICY_OK.test(name)) throw new ConfigError(option, 'a name of 1-64 chars from [A-Za-z0-9_.-]', name)
  return name
}

/**
 * Turns an identity into the part that goes between the braces. Safe identities pass through; others
 * become `~h:` + 32 chars of base64url(SHA-256) (192 bits: collisions are not a practical concern).
 *
 * Lossless: a string that is not well-formed UTF-16 (a lone surrogate, which UTF-8 would turn into
 * U+FFFD, so `'a\uD800'`, `'a\uDBFF'` and `'a\uFFFD'` would share a key) is hashed from its UTF-16 code
 * units, in a domain of its own (a leading 0xFF byte, which no UTF-8 text contains), so two different
 * strings never share a tag.
 *
 * @example
 * identityTag('user:42')        // 'user:42'
 * identityTag('a}{b')           // '~h:…' (hashed: braces must not pick the slot)
 * identityTag('a\uD800')        // '~h:…' (a lone surrogate has no UTF-8 form)
 */
export function identityTag(identity: string): string {
  let ascii = true
  for (let i = 0; i < identity.length; i++) {
    if (identity.charCodeAt(i) > 0x7f) {
      ascii = false
      break
    }
  }
  if (!ascii && !wellFormed(identity)) return HASHED + base64Url(sha256(utf16Bytes(identity))).slice(0, 32)
  if (
    identity.length > MAX_IDENTITY_BYTES ||
    UNSAFE.test(identity) ||
    identity.startsWith(HASHED) ||
    // Non-ASCII: the byte length can exceed the char length.
    (!ascii && utf8(identity).length > MAX_IDENTITY_BYTES)
  ) {
    return HASHED + base64Url(sha256(identity)).slice(0, 32)
  }
  return identity
}

/** True when every surrogate is paired (String.prototype.isWellFormed, which older runtimes lack). */
function wellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0xd800 || c > 0xdfff) continue
    if (c > 0xdbff) return false
    const next = s.charCodeAt(i + 1)
    if (!(next >= 0xdc00 && next <= 0xdfff)) return false
    i++
  }
  return true
}

/** 0xFF, then the UTF-16LE code units: injective, and disjoint from every UTF-8 text (which has no 0xFF byte). */
function utf16Bytes(s: string): Uint8Array {
  const out = new Uint8Array(1 + 2 * s.length)
  out[0] = 0xff
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    out[1 + 2 * i] = c & 0xff
    out[2 + 2 * i] = c >> 8
  }
  return out
}

/** Validates a per-call identity (before any store command). */
export function checkIdentity(identity: unknown, argument: string): string {
  if (typeof identity !== 'string' || identity.length === 0) {
    throw new InputError(argument, 'a non-empty string', identity)
  }
  return identity
}

/** The name of the one policy of a limiter built from inline options (`limit`, `window`, ...). */
export const SINGLE_POLICY = 'default'

/** Each algorithm's code in a key signature. */
const SIG_CODES: Readonly<Record<Algorithm, string>> = {
  'fixed-window': 'fw',
  'sliding-window': 'sw',
  'sliding-log': 'sl',
  'token-bucket': 'tb',
  gcra: 'gc',
  concurrency: 'cc',
}
const SIG_ALGORITHMS: ReadonlyMap<string, Algorithm> = new Map(
  Object.entries(SIG_CODES).map(([algorithm, code]) => [code, algorithm as Algorithm]),
)
const UNITS: readonly (readonly [number, string])[] = [
  [86_400_000, 'd'],
  [3_600_000, 'h'],
  [60_000, 'm'],
  [1000, 's'],
]

/** A window as its shortest exact duration: `1d`, `1h`, `15m`, `10s`, else milliseconds (`1500ms`). */
function windowCode(windowMs: number): string {
  for (const [ms, unit] of UNITS) if (windowMs % ms === 0) return `${windowMs / ms}${unit}`
  return `${windowMs}ms`
}

/**
 * What a policy's state means, `<alg>-<window>`: the part of every key that keeps apart the state of
 * policies that would misread each other's (a concurrency policy's window is its lease). The limit is not
 * in it: a deploy that changes a limit keeps its counts.
 *
 * @example
 * keySignature('sliding-window', 60_000)  // 'sw-1m'
 * keySignature('gcra', 1500)              // 'gc-1500ms'
 */
export function keySignature(algorithm: Algorithm, windowMs: number): string {
  return `${SIG_CODES[algorithm]}-${windowCode(windowMs)}`
}

/**
 * A calendar window's signature, `c<unit's initial>-<zone>`: its own state, never a fixed window's of the
 * same length, and another zone's periods are other periods.
 *
 * @example
 * calendarSignature({ unit: 'month', timeZone: 'Europe/Berlin' })  // 'cm-Europe/Berlin'
 */
export function calendarSignature(c: ResolvedCalendar): string {
  return `c${c.unit[0]}-${c.timeZone.replace(/[^A-Za-z0-9_+\-/]/g, '_')}`
}

/** A policy's signature: its calendar's, or its algorithm's and window's. */
function policySignature(p: ResolvedPolicy): string {
  return p.calendar ? calendarSignature(p.calendar) : keySignature(p.algorithm, p.windowMs)
}

/**
 * The part of a key after the identity's hash tag: `:<policy>:<sig>`, or `:<sig>` for a single-policy
 * limiter (`policy` undefined). Built once per policy.
 */
function keySuffix(signature: string, policy: string | undefined): string {
  return policy === undefined ? `:${signature}` : `:${policy}:${signature}`
}

/**
 * Builds the Redis key of one (policy, identity) pair. `signature` is {@link keySignature}'s; a
 * single-policy limiter passes no policy name.
 *
 * @example
 * buildKey('login', 'ip:1.2.3.4', keySignature('fixed-window', 900_000), 'ip') // 'login:{ip:1.2.3.4}:ip:fw-15m'
 * buildKey('tollgate', '1.2.3.4', 'sw-1m')                                      // 'tollgate:{1.2.3.4}:sw-1m'
 */
export function buildKey(prefix: string, identity: string, signature: string, policy?: string): string {
  return `${prefix}:{${identityTag(identity)}}${keySuffix(signature, policy)}`
}

/** The suffix of an identity's control key: after its hash tag, where no policy name can be. */
const CONTROL_SUFFIX = ':~c'

/**
 * An identity's control key, `<prefix>:{<identity>}:~c`: the small hash holding its block and allow
 * entries, in the identity's own slot, read by the decision scripts with its pair keys.
 *
 * @example
 * controlKey('tollgate', '203.0.113.9') // 'tollgate:{203.0.113.9}:~c'
 */
export function controlKey(prefix: string, identity: string): string {
  return `${prefix}:{${identityTag(identity)}}${CONTROL_SUFFIX}`
}

/**
 * The control key of the identity a pair key (built by {@link buildKey}) belongs to: its prefix and hash
 * tag, then `:~c`. Matches lua/includes/control.lua's `ctl_of`.
 *
 * @example
 * controlKeyOf('login:{ip:1.2.3.4}:ip:fw-15m') // 'login:{ip:1.2.3.4}:~c'
 */
export function controlKeyOf(pairKey: string): string {
  return pairKey.slice(0, pairKey.indexOf('}') + 1) + CONTROL_SUFFIX
}

/**
 * The index of a prefix's blocks, `<prefix>:{~c}:blocks` (identity -> end and reason), which
 * `blocks()` lists. No pair key ends in `:blocks` and no control key is `{~c}`'s but `:~c`.
 *
 * @example
 * controlIndexKey('tollgate') // 'tollgate:{~c}:blocks'
 */
export function controlIndexKey(prefix: string): string {
  return `${prefix}:{~c}:blocks`
}

/**
 * The index of a prefix's overrides, `<prefix>:{~c}:overrides` (identity -> end and limits), which
 * `overrides.list()` reads and which bounds how many identities hold one.
 *
 * @example
 * overrideIndexKey('tollgate') // 'tollgate:{~c}:overrides'
 */
export function overrideIndexKey(prefix: string): string {
  return `${prefix}:{~c}:overrides`
}

/** What {@link parseKey} reads from a key. */
export interface ParsedKey {
  prefix: string
  /** The identity's tag: the identity itself, or `~h:` and its hash (see {@link identityTag}). */
  tag: string
  /** The policy name; absent for a single-policy limiter's key. */
  policy?: string
  algorithm: Algorithm
  windowMs: number
  /** A calendar window's period and zone (`cm-Europe/Berlin`); `windowMs` is then its nominal length. */
  calendar?: ResolvedCalendar
}

const SIGNATURE = /^([a-z]{2})-([1-9][0-9]{0,15})(ms|s|m|h|d)$/
const CALENDAR_SIGNATURE = /^c([dwmy])-([A-Za-z0-9_+\-/]{1,64})$/
const CALENDAR_UNITS: Readonly<Record<string, CalendarUnit>> = { d: 'day', w: 'week', m: 'month', y: 'year' }
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/**
 * Reads a key this module built back into its parts, or `undefined` for any other name (a penalty key
 * `…!p`, a refund marker `…!<spend>`, a key of another layout or another program).
 *
 * @example
 * parseKey('login:{ip:1.2.3.4}:ip:fw-15m')
 * // { prefix: 'login', tag: 'ip:1.2.3.4', policy: 'ip', algorithm: 'fixed-window', windowMs: 900000 }
 * parseKey('tollgate:{1.2.3.4}:sw-1m')
 * // { prefix: 'tollgate', tag: '1.2.3.4', algorithm: 'sliding-window', windowMs: 60000 }
 */
export function parseKey(key: string): ParsedKey | undefined {
  const open = key.indexOf(':{')
  if (open < 0) return undefined
  const close = key.indexOf('}', open + 2)
  if (close < 0 || key.charCodeAt(close + 1) !== 0x3a /* : */) return undefined
  const prefix = key.slice(0, open)
  const tag = key.slice(open + 2, close)
  if (!PREFIX_OK.test(prefix) || tag.length === 0 || UNSAFE.test(tag)) return undefined
  const rest = key.slice(close + 2).split(':')
  if (rest.length > 2) return undefined
  const policy = rest.length === 2 ? rest[0] : undefined
  if (policy !== undefined && !POLICY_OK.test(policy)) return undefined
  const cal = CALENDAR_SIGNATURE.exec(rest[rest.length - 1]!)
  if (cal) {
    const calendar = { unit: CALENDAR_UNITS[cal[1]!]!, timeZone: cal[2]! }
    const parsed = {
      prefix,
      tag,
      algorithm: 'fixed-window' as const,
      windowMs: CALENDAR_NOMINAL_MS[calendar.unit],
      calendar,
    }
    return policy === undefined ? parsed : { ...parsed, policy }
  }
  const sig = SIGNATURE.exec(rest[rest.length - 1]!)
  // SIGNATURE's three groups are not optional: a match has them all, and the unit is one of UNIT_MS
  const algorithm = sig ? SIG_ALGORITHMS.get(sig[1]!) : undefined
  if (!sig || algorithm === undefined) return undefined
  const windowMs = Number(sig[2]) * UNIT_MS[sig[3]!]!
  // only the form keySignature writes: `60s` is not a key this module built
  if (!Number.isSafeInteger(windowMs) || windowCode(windowMs) !== `${sig[2]}${sig[3]}`) return undefined
  return policy === undefined
    ? { prefix, tag, algorithm, windowMs }
    : { prefix, tag, policy, algorithm, windowMs }
}

/** Escapes the glob metacharacters of Redis' MATCH (`*`, `?`, `[`, `]`, `\`). */
function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&')
}

/**
 * The `SCAN … MATCH` pattern of every key of one identity under a prefix: each policy's state, its
 * penalty and its refund markers, whatever the algorithm and window.
 *
 * @example
 * keyPattern('tollgate', '1.2.3.4')   // 'tollgate:{1.2.3.4}:*'
 * keyPattern('p', 'a*b')              // 'p:{a\\*b}:*'
 */
export function keyPattern(prefix: string, identity: string): string {
  return `${globEscape(prefix)}:{${globEscape(identityTag(identity))}}:*`
}

/**
 * The key that records a refund, so one spend is given back at most once whoever retries it. It shares
 * the pair key's hash tag (same slot) and cannot be another pair's key: `!` is never in a policy name.
 */
export function refundMarkerKey(key: string, spendId: string): string {
  return `${key}!${spendId}`
}

/**
 * Most policies one limiter may have, so most (policy, identity) pairs one call may name. Every script
 * must handle a call this large: `reset` passes its keys to `DEL` through Lua's `unpack`, which fails
 * at Lua's C-stack limit (LUAI_MAXCSTACK, 8,000 values), and a limiter this large already sends two
 * RateLimit headers of tens of kilobytes. 1,000 stays well below that limit. A call's
 * record key is checked against it before its names are walked, so an attacker-built record of a million
 * names costs nothing.
 * @example
 * new RateLimiter({ store, policies: tooMany }) // ConfigError when Object.keys(tooMany).length > MAX_POLICIES
 */
export const MAX_POLICIES = 1000

/**
 * Turns a call's key argument into the (policy, Redis key) pairs a store gets, one per policy in
 * declaration order. Built once per limiter; throws `InputError` (before any store command) for an empty
 * identity, a record naming a policy the limiter lacks, or one missing a policy.
 *
 * @example
 * const keys = new CallKeys('login', [ipPolicy, accountPolicy], false)
 * keys.entries({ ip: 'ip:1.2.3.4', account: 'email:a@b.c' }).map((e) => e.key)
 * // ['login:{ip:1.2.3.4}:ip:sw-15m', 'login:{email:a@b.c}:account:fw-15m']
 */
export class CallKeys {
  private readonly byName: ReadonlySet<string>
  /** Each policy's key suffix, parallel to `policies`: built here, so a call only concatenates. */
  private readonly suffixes: readonly string[]
  /** `<prefix>:{` and each `}<suffix>`: a key is two concatenations. */
  private readonly opening: string
  private readonly closings: readonly string[]
  /**
   * @param single one inline policy: its keys carry no policy name (`<prefix>:{<identity>}:<sig>`).
   */
  constructor(
    private readonly prefix: string,
    private readonly policies: readonly ResolvedPolicy[],
    single: boolean,
  ) {
    this.byName = new Set(policies.map((p) => p.name))
    this.suffixes = policies.map((p) => keySuffix(policySignature(p), single ? undefined : p.name))
    this.opening = `${prefix}:{`
    this.closings = this.suffixes.map((suffix) => `}${suffix}`)
  }

  entries(key: KeyInput): StoreEntry[] {
    const { prefix, policies, suffixes } = this
    if (typeof key === 'string') {
      const head = this.opening + identityTag(checkIdentity(key, 'key'))
      if (policies.length === 1) {
        return [{ policy: policies[0]!, key: head + this.closings[0], identity: key, builder: this }]
      }
      return policies.map((policy, i) => ({
        policy,
        key: head + this.closings[i],
        identity: key,
        builder: this,
      }))
    }
    if (typeof key !== 'object' || key === null)
      throw new InputError('key', 'a string or a record of policy name to key', key)
    const names = Object.keys(key)
    if (names.length > MAX_POLICIES) {
      throw new InputError('key', `at most ${MAX_POLICIES} identities (one per policy)`, `${names.length}`)
    }
    for (const name of names) {
      if (!this.byName.has(name)) {
        throw new InputError(
          `key.${name}`,
          `a policy name of this limiter (${policies.map((p) => p.name).join(', ')})`,
          name,
        )
      }
    }
    return policies.map((policy, i) => {
      if (!Object.hasOwn(key, policy.name)) {
        throw new InputError(`key.${policy.name}`, 'a non-empty string (every policy needs a key)', undefined)
      }
      const identity = checkIdentity(key[policy.name], `key.${policy.name}`)
      return { policy, key: `${prefix}:{${identityTag(identity)}}${suffixes[i]}`, identity, builder: this }
    })
  }
}

/**
 * The key of a pair's penalty state (see penalty.ts): the pair key's hash tag (same slot), and never
 * another pair's key (`!` is never in a policy name) nor a refund marker (spend ids are longer).
 *
 * @example
 * penaltyKey('login:{email:a@b.c}:account:fw-15m') // 'login:{email:a@b.c}:account:fw-15m!p'
 */
export function penaltyKey(key: string): string {
  return `${key}!p`
}

/**
 * The top set of a limiter's policy in one period (`RateLimiter.top`): identities it refused, by count.
 * `~h:t` can be no identity's tag (an identity starting with `~h:` is hashed to a longer one), and every
 * top set of a prefix shares its slot, so one script reads a policy's periods.
 *
 * @example
 * topKey('api', 'burst', 60000, 29012345)   // 'api:{~h:t}:burst:60000:29012345'
 */
export function topKey(prefix: string, policy: string, periodMs: number, index: number): string {
  return `${prefix}:{~h:t}:${policy}:${periodMs}:${index}`
}

/**
 * Where `storage: 'compact'` keeps a prefix's secret (stores given none) or its configured secret's
 * fingerprint. `~h:s` can be no identity's tag, as `~h:t` ({@link topKey}).
 *
 * @example
 * compactSecretKey('api') // 'api:{~h:s}'
 */
export function compactSecretKey(prefix: string): string {
  return `${prefix}:{~h:s}`
}
