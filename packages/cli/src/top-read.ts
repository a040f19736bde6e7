/**
 * The most refused identities of a prefix, read from the top sets a limiter keeps
 * (`<prefix>:{~h:t}:<policy>:<windowMs>:<index>`): found with SCAN on every primary, summed over each
 * policy's current and previous period, as `limiter.top()` sums them, and each identity's budget read as
 * `inspect` reads it. Shared by `tollgate top` and the dashboard.
 * @module
 */
import type { Connection } from './connect'
import type { DescribedPolicy, Description } from './describe'
import { type InspectRow, readPairs } from './inspect'
import { type CompactSecrets, compactSecrets, findState } from './state'

/** One refused identity of one policy, with its budget where the CLI can tell it. */
export interface TopRow {
  policy: string
  /** The top set's period: the policy's window (at least 1s). */
  windowMs: number
  identity: string
  /** Refusals in the current and previous period. */
  refused: number
  /** The described limit, when a description names the policy. */
  limit?: number
  /** The identity's state for this policy now, as `inspect` reads it; undefined when nothing is stored. */
  state?: InspectRow
}

export interface TopQuery {
  prefix: string
  /** How many rows, most refused first. */
  limit: number
  /** Only these policies (all when empty or undefined). */
  policies?: readonly string[]
  description?: Description
  secret?: string
  /** Warnings (a description that disagrees with a stored key). */
  warn?: (line: string) => void
}

const SCAN_COUNT = 1000
/** The tail of a top set's key after the prefix: policy, period, index. */
const TOP_KEY = /^(.+):(\d+):(\d+)$/

/** `text` matched literally by SCAN's glob. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&')
}

/** Every top set of `prefix`, from every primary (SCAN, never KEYS), by policy and period. */
export async function topSets(
  redis: Connection,
  prefix: string,
): Promise<Map<string, { policy: string; windowMs: number; indexes: Set<number> }>> {
  const head = `${prefix}:{~h:t}:`
  const groups = new Map<string, { policy: string; windowMs: number; indexes: Set<number> }>()
  for (const node of await redis.masters()) {
    let cursor = '0'
    do {
      const reply = await node.scan(cursor, { MATCH: `${escapeGlob(head)}*`, COUNT: SCAN_COUNT })
      for (const raw of reply.keys) {
        const m = TOP_KEY.exec(String(raw).slice(head.length))
        if (!m) continue
        const [, policy = '', period = '', index = ''] = m
        const id = `${policy}\n${period}`
        let group = groups.get(id)
        if (!group) {
          group = { policy, windowMs: Number(period), indexes: new Set() }
          groups.set(id, group)
        }
        group.indexes.add(Number(index))
      }
      cursor = String(reply.cursor)
    } while (cursor !== '0')
  }
  return groups
}

/** The described policy a top set's policy name refers to (`default`: a single-policy limiter). */
function describedFor(description: Description | undefined, policy: string): DescribedPolicy | undefined {
  return description?.policies.find((p) => (p.name ?? 'default') === policy)
}

/** The most refused identities, most first (ties: by identity), with their state. */
export async function readTop(redis: Connection, query: TopQuery, now = Date.now()): Promise<TopRow[]> {
  const rows: TopRow[] = []
  for (const { policy, windowMs, indexes } of (await topSets(redis, query.prefix)).values()) {
    if (query.policies?.length && !query.policies.includes(policy)) continue
    const index = Math.floor(now / windowMs)
    const summed = new Map<string, number>()
    for (const i of [index, index - 1]) {
      if (!indexes.has(i)) continue
      const key = `${query.prefix}:{~h:t}:${policy}:${windowMs}:${i}`
      const node = await redis.nodeFor(key)
      for (const { value, score } of await node.zRangeWithScores(key, 0, -1))
        summed.set(String(value), (summed.get(String(value)) ?? 0) + Number(score))
    }
    const d = describedFor(query.description, policy)
    for (const [identity, refused] of summed)
      rows.push({ policy, windowMs, identity, refused, ...(d ? { limit: d.limit } : {}) })
  }
  rows.sort(
    (a, b) =>
      b.refused - a.refused ||
      (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0) ||
      (a.policy < b.policy ? -1 : a.policy > b.policy ? 1 : 0),
  )
  const top = rows.slice(0, query.limit)
  const secrets = await compactSecrets(redis, query.prefix, query.secret)
  for (const row of top) row.state = await stateOf(redis, query, row, secrets)
  return top
}

/** The identity's pair for the row's policy, read as `inspect` reads it. */
async function stateOf(
  redis: Connection,
  query: TopQuery,
  row: TopRow,
  secrets: CompactSecrets,
): Promise<InspectRow | undefined> {
  // An identity too long for a top set is kept as its hashed tag: no key leads back to it.
  if (row.identity.startsWith('~h:')) return undefined
  const stored = await findState(redis, query.prefix, row.identity, secrets.place)
  const pairs = stored.pairs.filter((p) => (p.policy ?? 'default') === row.policy)
  if (pairs.length === 0) return undefined
  const read = await readPairs(
    redis,
    query.prefix,
    secrets.store,
    row.identity,
    pairs,
    (pair) => describedFor(query.description, pair.policy ?? 'default'),
    query.description,
    query.warn ?? (() => {}),
  )
  return read[0]
}
