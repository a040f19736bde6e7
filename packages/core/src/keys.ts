/**
 * The only place Redis keys are built. Format: `<prefix>:{<identity>}:<policy>`, so every key of one
 * identity shares a Redis Cluster hash slot, and no brace a client sends can steer the slot, make two
 * identities collide, or grow a key past a fixed bound.
 * @module
 */
import { ConfigError, InputError } from './errors'
import { base64Url, sha256, utf8 } from './hash'

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
 * @example
 * identityTag('user:42')        // 'user:42'
 * identityTag('a}{b')           // '~h:…' (hashed: braces must not pick the slot)
 */
export function identityTag(identity: string): string {
  if (
    identity.length > MAX_IDENTITY_BYTES ||
    UNSAFE.test(identity) ||
    identity.startsWith(HASHED) ||
    // Non-ASCII: the byte length can exceed the char length.
    (hasNonAscii(identity) && utf8(identity).length > MAX_IDENTITY_BYTES)
  ) {
    return HASHED + base64Url(sha256(identity)).slice(0, 32)
  }
  return identity
}

function hasNonAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return true
  return false
}

/** Validates a per-call identity (before any store command). */
export function checkIdentity(identity: unknown, argument: string): string {
  if (typeof identity !== 'string' || identity.length === 0) {
    throw new InputError(argument, 'a non-empty string', identity)
  }
  return identity
}

/**
 * Builds the Redis key of one (policy, identity) pair.
 *
 * @example
 * buildKey('login', 'ip:1.2.3.4', 'ip') // 'login:{ip:1.2.3.4}:ip'
 */
export function buildKey(prefix: string, identity: string, policy: string): string {
  return `${prefix}:{${identityTag(identity)}}:${policy}`
}
