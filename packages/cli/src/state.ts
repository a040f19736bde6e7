/**
 * What is stored for one identity: found with SCAN on the primary that owns the identity's slot (every
 * key of an identity shares its hash tag), each key read for its algorithm and window.
 * @module
 */
import { type Algorithm, keyPattern, parseKey, RedisStore } from '@tollgate/core'
import {
  buildKey,
  compactSecretKey,
  compactSpot,
  identityTag,
  keptCompactSecret,
  keySignature,
} from '@tollgate/core/scripts'
import type { Connection } from './connect'
import { CliError } from './errors'
import type { CalendarLabel } from './format'

/** One stored (policy, identity) pair key, with what its name says. */
export interface StoredPair {
  key: string
  /** undefined: a single-policy limiter's key (no policy part). */
  policy: string | undefined
  algorithm: Algorithm
  windowMs: number
  /** A calendar window's period and zone, as its key's signature says. */
  calendar?: CalendarLabel
  /**
   * A counter under `storage: 'compact'`: `key` is then the name the pair has under the default layout
   * (what a limiter's `keysFor()` says), and the counter is field `field` of hash `level`, one of the
   * levels after `first`, the bucket's first.
   */
  compact?: { first: string; level: string; field: string }
}

export interface StoredState {
  /** The pair keys, sorted. */
  pairs: StoredPair[]
  /** Every key found: pair keys, penalty state (`!p`), refund markers (`!<spend>`), older layouts. */
  all: string[]
}

const SCAN_COUNT = 1000

/** The keys matching `match` on the primary that owns the slot of `tagged`. */
async function scan(redis: Connection, tagged: string, match: string) {
  // Any key with the identity's hash tag routes to the node that owns its slot.
  const node = await redis.nodeFor(tagged)
  const found = new Set<string>()
  let cursor = '0'
  do {
    const reply = await node.scan(cursor, { MATCH: match, COUNT: SCAN_COUNT })
    for (const k of reply.keys) found.add(String(k))
    cursor = String(reply.cursor)
  } while (cursor !== '0')
  return { node, keys: [...found].sort() }
}

/** The end of an identity's control key (`<prefix>:{<tag>}:~c`), whose entries a reset leaves alone. */
const CONTROL_END = '}:~c'

/**
 * Every key of `identity` under `prefix`, from the one primary that can hold them; with the store's
 * `secret`, also its counters under `storage: 'compact'` (fields of its bucket's hashes, each level in
 * turn) and the keys named after them (penalty state, refund markers).
 */
export async function findState(
  redis: Connection,
  prefix: string,
  identity: string,
  secret?: string,
): Promise<StoredState> {
  const tag = identityTag(identity)
  const scanned = await scan(redis, `${prefix}:{${tag}}`, keyPattern(prefix, identity))
  // the identity's block, allow and override entries are not state to reset: unblock and overrides own
  // them (and on a cluster a copy beside its compact counters, which a reset could not reach)
  const all = scanned.keys.filter((k) => !k.endsWith(CONTROL_END))
  const pairs: StoredPair[] = []
  for (const key of all) {
    const parsed = parseKey(key)
    if (!parsed) continue
    const { policy, algorithm, windowMs, calendar } = parsed
    pairs.push({ key, policy, algorithm, windowMs, ...(calendar ? { calendar } : {}) })
  }
  if (secret === undefined) return { pairs, all }
  const { bucket, field } = compactSpot(secret, tag)
  const head = `${prefix}:{~h:c${bucket}}`
  const found = await scan(redis, head, `${escapeGlob(head)}*`)
  const levels = new Set(found.keys)
  for (const first of found.keys) {
    const parsed = parseKey(first)
    if (
      !parsed ||
      parsed.calendar ||
      (parsed.algorithm !== 'fixed-window' && parsed.algorithm !== 'sliding-window')
    )
      continue
    for (const level of [first, `${first}!2`, `${first}!3`]) {
      if (!levels.has(level) || Number(await found.node.hExists(level, field)) !== 1) continue
      const { policy, algorithm, windowMs } = parsed
      const key = buildKey(prefix, identity, keySignature(algorithm, windowMs), policy)
      pairs.push({ key, policy, algorithm, windowMs, compact: { first, level, field } })
      for (const k of found.keys) if (k.startsWith(`${first}!${field}!`)) all.push(k)
      break
    }
  }
  pairs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  return { pairs, all }
}

/** `text` matched literally by SCAN's glob. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&')
}

/** Deletes every key of the identity; resolves to how many Redis removed. */
export async function deleteState(redis: Connection, keys: readonly string[]): Promise<number> {
  if (keys.length === 0) return 0
  const node = await redis.nodeFor(keys[0]!)
  let removed = 0
  // One slot, so one DEL may carry many keys even on a cluster; chunks keep each command small.
  for (let i = 0; i < keys.length; i += SCAN_COUNT) {
    removed += Number(await node.del(keys.slice(i, i + SCAN_COUNT)))
  }
  return removed
}

/** Whether any key at all starts with `prefix:` (bounded: a typo'd prefix is the question, not a census). */
export function prefixHasKeys(redis: Connection, prefix: string): Promise<boolean | undefined> {
  return anyKey(redis, `${escapeGlob(prefix)}:*`)
}

/**
 * Whether `prefix` holds counters of `storage: 'compact'` (bucket hashes `<prefix>:{~h:c<n>}...`), which
 * no identity's name leads to without the store's secret; bounded as {@link prefixHasKeys}.
 */
export function prefixHasCompact(redis: Connection, prefix: string): Promise<boolean | undefined> {
  return anyKey(redis, `${escapeGlob(prefix)}:{~h:c*`)
}

/** The secrets of {@link compactSecrets}. */
export interface CompactSecrets {
  place: string | undefined
  store: string | undefined
}

/**
 * What finds a prefix's compact counters: `place` gives their spots ({@link findState}), `store` is the
 * `secret` option of a store that reads them. The prefix's kept secret when Redis holds one and `given`
 * is none or that very secret (its stores are then given none, as the app's are); else `given`.
 */
export async function compactSecrets(
  redis: Connection,
  prefix: string,
  given: string | undefined,
): Promise<CompactSecrets> {
  const kept = keptCompactSecret(await redis.client.get(compactSecretKey(prefix)))
  if (kept !== undefined && (given === undefined || given === kept)) return { place: kept, store: undefined }
  return { place: given, store: given }
}

/**
 * The store a prefix's block, allow and override entries are written through. On a cluster, a prefix
 * with compact counters needs its secret: the store writes each entry to a copy in the identity's bucket's
 * slot too, which those counters read. `given`: the stores' configured `secret`, if any.
 */
export async function controlStore(
  redis: Connection,
  prefix: string,
  given: string | undefined,
): Promise<RedisStore> {
  if (!redis.cluster) return new RedisStore(redis.client)
  const held = await redis.client.get(compactSecretKey(prefix))
  if (held == null) return new RedisStore(redis.client)
  if (keptCompactSecret(held) !== undefined) return new RedisStore(redis.client, { storage: 'compact' })
  if (given === undefined) {
    throw new CliError(
      `prefix '${prefix}' keeps compact counters under a configured secret: set $TOLLGATE_SECRET to it, so ` +
        'that the entry reaches them',
      2,
    )
  }
  return new RedisStore(redis.client, { storage: 'compact', secret: given })
}

/** Whether a key matches `match` on any primary; undefined when a bounded scan could not tell. */
async function anyKey(redis: Connection, match: string): Promise<boolean | undefined> {
  for (const node of await redis.masters()) {
    let cursor = '0'
    let rounds = 0
    do {
      const reply = await node.scan(cursor, { MATCH: match, COUNT: SCAN_COUNT })
      if (reply.keys.length > 0) return true
      cursor = String(reply.cursor)
      if (++rounds >= 100) return undefined
    } while (cursor !== '0')
  }
  return false
}
