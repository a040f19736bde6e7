/**
 * A call whose keys live in several Redis Cluster slots: one script per slot, and for a consume that one
 * slot refuses, the compensating refunds of the spends the other slots made (see docs/cluster.md).
 * @module
 */

import { costAt, isFree, pickCost } from '../../cost'
import type { PairCost, SpendOnce, Store, StoreEntry, StoreReply, StoreResult } from '../../types'
import { keySlot, sameHashTag } from './cluster-slot'

/** The store's calls within one slot, which a call across slots makes once per slot. */
export type SlotCalls = Pick<Store, 'consume' | 'peek' | 'refund'>

/**
 * A call whose keys live in several slots: one atomic consume per slot, in parallel. Each script admits
 * only what its own keys allow, so the call never over-admits. When any slot refuses (or fails), the
 * spends that stood on the other slots are refunded with their tags before answering: a refused call
 * holds another key's quota only until that refund lands. A refund that fails leaves the spend to expire
 * with its window, which can only refuse more, never admit more.
 */
export async function consumeAcross(
  calls: SlotCalls,
  entries: readonly StoreEntry[],
  groups: number[][],
  cost: PairCost,
  timeoutMs?: number,
): Promise<StoreReply> {
  const settled = await Promise.allSettled(
    groups.map((g) => calls.consume(pick(entries, g), pickCost(cost, g), timeoutMs)),
  )
  let refused = false
  let failure: unknown
  for (const s of settled) {
    if (s.status === 'rejected') failure ??= s.reason
    else if (!allAllowed(s.value)) refused = true
  }
  const replies = settled.map((s) => (s.status === 'fulfilled' ? s.value : undefined))
  if (!refused && failure === undefined) return merge(entries.length, groups, replies as StoreReply[])
  const refunds: Promise<void>[] = []
  for (let g = 0; g < groups.length; g++) {
    const reply = replies[g]
    const partCost = pickCost(cost, groups[g]!)
    if (!reply || !allAllowed(reply) || isFree(partCost)) continue
    const part = pick(entries, groups[g]!)
    const tags = reply.results.map((r) => r.tag)
    refunds.push(
      calls.refund(part, tags, partCost).then(
        () => {
          // Given back: the refused call reports these pairs as they were before its spend.
          replies[g] = {
            nowUs: reply.nowUs,
            results: reply.results.map((r, i) => beforeSpend(r, part[i]!.policy.burst, costAt(partCost, i))),
          }
        },
        () => {}, // not given back: the numbers after the spend stay true
      ),
    )
  }
  await Promise.all(refunds)
  // A slot that failed leaves the call undecided: the failure policy decides, as for one node.
  if (failure !== undefined) throw failure
  return merge(entries.length, groups, replies as StoreReply[])
}

/** A peek whose keys live in several slots: one read-only script per slot, in parallel. */
export async function peekAcross(
  calls: SlotCalls,
  entries: readonly StoreEntry[],
  groups: number[][],
  cost: PairCost,
): Promise<StoreReply> {
  const replies = await Promise.all(groups.map((g) => calls.peek(pick(entries, g), pickCost(cost, g))))
  return merge(entries.length, groups, replies)
}

/** A refund whose keys live in several slots: one script per slot, in parallel. */
export async function refundAcross(
  calls: SlotCalls,
  entries: readonly StoreEntry[],
  groups: number[][],
  tags: readonly number[],
  cost: PairCost,
  once?: SpendOnce,
): Promise<number> {
  // One marker per slot group, in that group's slot: each group's script is idempotent on its own.
  const times = await Promise.all(
    groups.map((g) =>
      calls.refund(
        pick(entries, g),
        pick(tags, g),
        pickCost(cost, g),
        once && { ...once, spent: pickCost(once.spent, g) },
      ),
    ),
  )
  return Math.max(...times)
}

/**
 * The entries' indexes grouped by hash slot, or `undefined` when one script can take them all (every key
 * shares one hash tag, the common case, decided without hashing; or all land in one slot anyway).
 */
export function slotGroups(entries: readonly StoreEntry[]): number[][] | undefined {
  if (entries.length < 2) return undefined
  const first = entries[0]!.key
  let i = 1
  while (i < entries.length && sameHashTag(first, entries[i]!.key)) i++
  if (i === entries.length) return undefined
  const bySlot = new Map<number, number[]>()
  for (let j = 0; j < entries.length; j++) {
    const slot = keySlot(entries[j]!.key)
    const group = bySlot.get(slot)
    if (group) group.push(j)
    else bySlot.set(slot, [j])
  }
  return bySlot.size > 1 ? [...bySlot.values()] : undefined
}

export function pick<T>(items: readonly T[], indexes: readonly number[]): T[] {
  const out = new Array<T>(indexes.length)
  for (let i = 0; i < indexes.length; i++) out[i] = items[indexes[i]!]!
  return out
}

/** Reassembles per-slot replies in the call's entry order. */
function merge(pairs: number, groups: readonly number[][], replies: readonly StoreReply[]): StoreReply {
  const results = new Array<StoreResult>(pairs)
  let nowUs = 0
  for (let g = 0; g < groups.length; g++) {
    const reply = replies[g]!
    const group = groups[g]!
    nowUs = Math.max(nowUs, reply.nowUs)
    for (let i = 0; i < group.length; i++) results[group[i]!] = reply.results[i]!
  }
  return { nowUs, results }
}

function allAllowed(reply: StoreReply): boolean {
  for (const r of reply.results) if (!r.allowed) return false
  return true
}

/**
 * An admitted pair's numbers as they were before a spend of `cost` that is being given back: `remaining`
 * exactly; `resetMs` is 0 when that leaves the pair at full capacity, else the post-spend value, an upper
 * bound (the pre-spend reset is not in the reply).
 */
function beforeSpend(r: StoreResult, capacity: number, cost: number): StoreResult {
  const remaining = Math.min(capacity, r.remaining + cost)
  return {
    allowed: true,
    remaining,
    resetMs: remaining >= capacity ? 0 : r.resetMs,
    retryAfterMs: 0,
    tag: r.tag,
  }
}
