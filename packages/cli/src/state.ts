/**
 * What is stored for one identity: found with SCAN on the primary that owns the identity's slot (every
 * key of an identity shares its hash tag), each key read for its algorithm and window.
 * @module
 */
import { type Algorithm, keyPattern, parseKey } from '@tollgate/core'
import { identityTag } from '@tollgate/core/scripts'
import type { Connection } from './connect'

/** One stored (policy, identity) pair key, with what its name says. */
export interface StoredPair {
  key: string
  /** undefined: a single-policy limiter's key (no policy part). */
  policy: string | undefined
  algorithm: Algorithm
  windowMs: number
}

export interface StoredState {
  /** The pair keys, sorted. */
  pairs: StoredPair[]
  /** Every key found: pair keys, penalty state (`!p`), refund markers (`!<spend>`), older layouts. */
  all: string[]
}

const SCAN_COUNT = 1000

/** Every key of `identity` under `prefix`, from the one primary that can hold them. */
export async function findState(redis: Connection, prefix: string, identity: string): Promise<StoredState> {
  // Any key with the identity's hash tag routes to the node that owns its slot.
  const node = await redis.nodeFor(`${prefix}:{${identityTag(identity)}}`)
  const match = keyPattern(prefix, identity)
  const found = new Set<string>()
  let cursor = '0'
  do {
    const reply = await node.scan(cursor, { MATCH: match, COUNT: SCAN_COUNT })
    for (const k of reply.keys) found.add(String(k))
    cursor = String(reply.cursor)
  } while (cursor !== '0')
  const all = [...found].sort()
  const pairs: StoredPair[] = []
  for (const key of all) {
    const parsed = parseKey(key)
    if (!parsed) continue
    pairs.push({ key, policy: parsed.policy, algorithm: parsed.algorithm, windowMs: parsed.windowMs })
  }
  return { pairs, all }
}

/** Deletes every key of the identity; resolves to how many Redis removed. */
export async function deleteState(redis: Connection, keys: readonly string[]): Promise<number> {
  if (keys.length === 0) return 0
  const node = await redis.nodeFor(keys[0])
  let removed = 0
  // One slot, so one DEL may carry many keys even on a cluster; chunks keep each command small.
  for (let i = 0; i < keys.length; i += SCAN_COUNT) {
    removed += Number(await node.del(keys.slice(i, i + SCAN_COUNT)))
  }
  return removed
}

/** Whether any key at all starts with `prefix:` (bounded: a typo'd prefix is the question, not a census). */
export async function prefixHasKeys(redis: Connection, prefix: string): Promise<boolean | undefined> {
  const match = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}:*`
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
