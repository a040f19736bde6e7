/**
 * The only place Redis keys are built. Format: `<prefix>:{<identity>}:<policy>` (`<prefix>:{<identity>}`
 * for a limiter with one inline policy), so every key of one
 * identity shares a Redis Cluster hash slot, and no brace a client sends can steer the slot, make two
 * identities collide, or grow a key past a fixed bound.
 * @module
 */
import { ConfigError, InputError } from './errors'
import { base64Url, sha256, utf8 } from './hash'
import type { KeyInput, ResolvedPolicy, StoreEntry } from './types'

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

/**
 * The name of the one policy of a limiter built from inline options (`limit`, `window`, ...). Its keys
 * carry no policy suffix: one identity, one key, `<prefix>:{<identity>}` (8 bytes less per key than
 * `:default`, which moves a typical IPv4 key into a smaller allocation class).
 */
export const SINGLE_POLICY = 'default'

/**
 * Builds the Redis key of one (policy, identity) pair from an identity tag (see {@link identityTag}).
 * `policy` undefined: the single-policy form, without suffix.
 */
export function keyOfTag(prefix: string, tag: string, policy: string | undefined): string {
  return policy === undefined ? `${prefix}:{${tag}}` : `${prefix}:{${tag}}:${policy}`
}

/**
 * Builds the Redis key of one (policy, identity) pair. A single-policy limiter passes no policy.
 *
 * @example
 * buildKey('login', 'ip:1.2.3.4', 'ip') // 'login:{ip:1.2.3.4}:ip'
 * buildKey('tollgate', '1.2.3.4')       // 'tollgate:{1.2.3.4}'
 */
export function buildKey(prefix: string, identity: string, policy?: string): string {
  return keyOfTag(prefix, identityTag(identity), policy)
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
 * from 8,000 keys on Redis 7.0 (LUAI_MAXCSTACK; measured: 7,999 work, 8,000 fail), and a limiter this
 * large already sends two RateLimit headers of tens of kilobytes. 1,000 leaves an 8x margin. A call's
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
 * // ['login:{ip:1.2.3.4}:ip', 'login:{email:a@b.c}:account']
 */
export class CallKeys {
  private readonly byName: ReadonlySet<string>
  /**
   * @param single one inline policy: its keys carry no policy suffix (`<prefix>:{<identity>}`).
   */
  constructor(
    private readonly prefix: string,
    private readonly policies: readonly ResolvedPolicy[],
    private readonly single: boolean,
  ) {
    this.byName = new Set(policies.map((p) => p.name))
  }

  entries(key: KeyInput): StoreEntry[] {
    const { prefix, policies } = this
    if (typeof key === 'string') {
      const tag = identityTag(checkIdentity(key, 'key'))
      if (this.single) return [{ policy: policies[0], key: keyOfTag(prefix, tag, undefined), identity: key }]
      return policies.map((policy) => ({ policy, key: keyOfTag(prefix, tag, policy.name), identity: key }))
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
    return policies.map((policy) => {
      if (!Object.hasOwn(key, policy.name)) {
        throw new InputError(`key.${policy.name}`, 'a non-empty string (every policy needs a key)', undefined)
      }
      const identity = checkIdentity(key[policy.name], `key.${policy.name}`)
      return { policy, key: buildKey(prefix, identity, this.single ? undefined : policy.name), identity }
    })
  }
}
