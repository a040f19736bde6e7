/**
 * What RedisStore sends and reads back: the KEYS and ARGV of each script call, and the one decoder of
 * the per-pair results that the consume, peek and batch replies share.
 * @module
 */

import { ALGORITHM_CODES, CALENDAR_CODE, COMPACT_CODES } from '../../algorithms'
import { periodsAround } from '../../calendar'
import { controlKeys } from '../../controls'
import { costAt } from '../../cost'
import { StoreError } from '../../errors'
import { controlKeyOf, penaltyKey } from '../../keys'
import type { PatternTable } from '../../patterns'
import { penaltyArgs } from '../../penalty'
import type { PairCost, ResolvedPolicy, SpendOnce, StoreEntry, StoreReply, StoreResult } from '../../types'

// A policy's four ARGV strings never change: built once per policy, not per call.
/** A pair's four ARGV strings: alg, limit, window_ms, burst. */
type PolicyArgs = readonly [string, string, string, string]

const POLICY_ARGS = new WeakMap<ResolvedPolicy, PolicyArgs>()
/** The compact twin of each fixed-window and sliding-window policy (compact.ts). */
const TWINS = new WeakMap<ResolvedPolicy, ResolvedPolicy>()

/** Characters of a compact pair's field, the last part of its entry's key (compact.ts). */
export const FIELD_CHARS = 9

/**
 * The policy a compact pair carries: the same numbers under code 7 (fixed-window) or 8 (sliding-window),
 * one object per policy, so the batcher's runs still group calls by policy.
 */
export function compactTwin(p: ResolvedPolicy): ResolvedPolicy {
  let twin = TWINS.get(p)
  if (!twin) {
    twin = { ...p }
    const code = COMPACT_CODES[p.algorithm as keyof typeof COMPACT_CODES]
    POLICY_ARGS.set(twin, [String(code), String(p.limit), String(p.windowMs), ''])
    TWINS.set(p, twin)
  }
  return twin
}

/**
 * A compact pair (compact.ts): `key` is `<first level>!<field>` (the base of its penalty key and refund
 * markers, and its slot), with its bucket's three level keys, its field, and the control key its
 * identity's entries are read from (on a cluster, their copy in the bucket's slot).
 */
export interface CompactEntry extends StoreEntry {
  readonly levels: readonly [string, string, string]
  readonly field: string
  readonly control: string
  /**
   * Sent whole (its three levels) from now on: a lean call of it (its first level only,
   * lua/includes/keys.lua) was answered {@link RESEND}, its bucket's first level being full.
   */
  whole: boolean
}

/**
 * What a lean compact call is answered (consume.lua's allowed, or a call's in a batch's 'l' run) when
 * it needs the levels below its bucket's first, which it was sent without: nothing was read into a
 * decision or changed; it goes again whole.
 */
export const RESEND = -4

/** Whether a consume reply is {@link RESEND}: `{ now_us, -4 }`. */
export function isResend(reply: unknown): boolean {
  return Array.isArray(reply) && reply.length === 2 && Number(reply[1]) === RESEND
}

/**
 * Whether a one-pair consume of `e` goes lean: a compact pair sent as its bucket's first level and its
 * control key (two keys, not four), the levels below needed only once the first is full.
 */
export function isLean(e: StoreEntry): e is CompactEntry {
  return (e as CompactEntry).whole === false
}

/** Appends a lean compact pair's keys: its first level and its control key (lua/includes/keys.lua). */
export function pushLean(keys: string[], e: CompactEntry): void {
  keys.push(e.levels[0], e.control)
}

/** The control key a pair's identity's entries are read from (control.lua's ctl_of). */
export function controlOf(e: StoreEntry): string {
  return isCompact(e) ? e.control : controlKeyOf(e.key)
}

/** Whether an entry is a compact pair: three keys (its bucket's levels) and a field. */
export function isCompact(e: StoreEntry): e is CompactEntry {
  return (e as CompactEntry).field !== undefined
}

/** A pair's algorithm code as the scripts read it (7, 8 for a compact pair). */
export function entryCode(e: StoreEntry): number {
  if (e.policy.calendar) return CALENDAR_CODE
  const algorithm = e.policy.algorithm
  return isCompact(e) ? COMPACT_CODES[algorithm as keyof typeof COMPACT_CODES] : ALGORITHM_CODES[algorithm]
}

/** A compact pair's field, which takes the burst slot of its ARGV. */
export function fieldOf(e: StoreEntry): string {
  return (e as CompactEntry).field
}

/**
 * Appends an entry's keys: its own, or a compact pair's three levels and its control key
 * (lua/includes/keys.lua).
 */
export function pushKeys(keys: string[], e: StoreEntry): void {
  if (!isCompact(e)) {
    keys.push(e.key)
    return
  }
  const [one, two, three] = e.levels
  keys.push(one, two, three, e.control)
}

/** A pair's four ARGV strings: its policy's, with a compact pair's field in the burst slot. */
function pairArgs(e: StoreEntry): PolicyArgs {
  const pa = policyArgs(e.policy)
  return isCompact(e) ? [pa[0], pa[1], pa[2], fieldOf(e)] : pa
}

/** The four ARGV strings of a policy (alg, limit, window_ms, burst), cached per policy. */
export function policyArgs(p: ResolvedPolicy): PolicyArgs {
  if (p.calendar) return calendarArgs(p)
  let args = POLICY_ARGS.get(p)
  if (!args) {
    args = [String(ALGORITHM_CODES[p.algorithm]), String(p.limit), String(p.windowMs), String(p.burst)]
    POLICY_ARGS.set(p, args)
  }
  return args
}

/**
 * A calendar policy's four ARGV strings: its window slot carries the period boundaries around this
 * process's clock (calendar.lua picks Redis' period among them), rebuilt only when they move on.
 */
function calendarArgs(p: ResolvedPolicy): PolicyArgs {
  const window = periodsAround(p.calendar!, Date.now()).arg
  let args = POLICY_ARGS.get(p)
  if (args === undefined || args[2] !== window) {
    args = [String(CALENDAR_CODE), String(p.limit), window, String(p.burst)]
    POLICY_ARGS.set(p, args)
  }
  return args
}

/** The algorithm code every entry shares, or 0 when they mix (then the general script runs). */
export function sharedAlgorithm(entries: readonly StoreEntry[]): number {
  const code = entryCode(entries[0]!)
  for (let i = 1; i < entries.length; i++) if (entryCode(entries[i]!) !== code) return 0
  return code
}

/** The pairs' keys, in the call's order. */
export function keysOf(entries: readonly StoreEntry[]): string[] {
  const first = entries[0]!
  if (entries.length === 1 && !isCompact(first)) return [first.key]
  const keys: string[] = []
  for (let i = 0; i < entries.length; i++) pushKeys(keys, entries[i]!)
  return keys
}

/** The pairs' keys, then their identities' control keys (consume.lua, peek.lua). */
export function withControls(entries: readonly StoreEntry[]): string[] {
  const keys = keysOf(entries)
  for (const key of controlKeys(entries, controlOf)) keys.push(key)
  return keys
}

/**
 * The pattern tail of a consume or peek (lua/includes/pattern.lua): the table's version, then the value
 * each identity's longest pattern has, in the order of the call's control keys.
 */
export function patternTail(table: PatternTable, entries: readonly StoreEntry[]): string {
  if (entries.length === 1) {
    const e = entries[0]!
    if (table.empty || e.identity === undefined) return table.bare
    const v = table.match(e.identity)
    return v === '' ? table.bare : `${table.bare};${v}`
  }
  const controls: string[] = []
  let tail = table.bare
  let any = false
  for (const e of entries) {
    const key = controlOf(e)
    if (controls.includes(key)) continue
    controls.push(key)
    const v = table.empty || e.identity === undefined ? '' : table.match(e.identity)
    if (v !== '') any = true
    tail += `;${v}`
  }
  return any ? tail : table.bare
}

/** What the scripts answer when the version key is newer than the call's pattern table (pattern.lua). */
export const STALE = -3

/** How often a call (or batch) found {@link STALE} goes again after reloading its pattern tables. */
export const STALE_ATTEMPTS = 3

/** The error of a call still stale after {@link STALE_ATTEMPTS} reloads. */
export function staleError(): StoreError {
  return new StoreError('pattern overrides changed during every attempt')
}

/** Whether a consume, peek or batch reply is {@link STALE}: `{ now_us, -3 }`. */
export function isStale(reply: unknown): boolean {
  return Array.isArray(reply) && reply.length === 2 && Number(reply[1]) === STALE
}

/**
 * ARGV of one consume or peek (consume.lua): the cost, 4 per pair, then a cost per pair if any, then a
 * consume's act-by time (server ms, 0 for none) when given.
 */
export function checkArgs(entries: readonly StoreEntry[], cost: PairCost, actBy?: number): string[] {
  const n = entries.length
  const per = typeof cost !== 'number'
  const args = new Array<string>(1 + (per ? 5 : 4) * n + (actBy === undefined ? 0 : 1))
  if (actBy !== undefined) args[args.length - 1] = String(actBy)
  args[0] = per ? '-1' : String(cost)
  for (let i = 0; i < n; i++) {
    const pa = pairArgs(entries[i]!)
    for (let j = 0; j < 4; j++) args[1 + 4 * i + j] = pa[j]!
    // a cost per pair: after the pairs (consume.lua)
    if (per) args[1 + 4 * n + i] = String(cost[i])
  }
  return args
}

/** ARGV of one refund (refund.lua): 5 per pair, or 7 per pair with a cost per pair. */
export function refundArgs(
  entries: readonly StoreEntry[],
  tags: readonly number[],
  cost: PairCost,
  once?: SpendOnce,
): string[] {
  let args: string[]
  if (typeof cost === 'number' && (once === undefined || typeof once.spent === 'number')) {
    args = [String(cost)]
    entries.forEach((e, i) => {
      args.push(...pairArgs(e), String(tags[i]))
    })
    if (once) args.push(String(once.spent))
  } else {
    // a cost per pair: 7 per pair, each with its cost and whole spend (refund.lua)
    args = ['*']
    entries.forEach((e, i) => {
      const spent = once ? costAt(once.spent, i) : 0
      args.push(...pairArgs(e), String(tags[i]), String(costAt(cost, i)), String(spent))
    })
  }
  if (once?.settle) args.push('1')
  return args
}

/**
 * KEYS and ARGV of one call with penalties, as lua/batch.lua takes it ('C' consume, 'P' peek), its
 * identities' control keys first ('~').
 */
export function penaltyCall(
  op: 'C' | 'P',
  entries: readonly StoreEntry[],
  cost: PairCost,
  actBy = 0,
  patterns?: { table: PatternTable; versionKey: string },
): { keys: string[]; args: string[] } {
  const controls = controlKeys(entries, controlOf)
  const tail = patterns && patternTail(patterns.table, entries)
  const keys: string[] = []
  const args: string[] = []
  // the pattern table's version first ('v'), then its matches for the control keys ('=')
  if (tail !== undefined) {
    keys.push(patterns!.versionKey)
    args.push('v', String(patterns!.table.version))
  }
  for (const key of controls) keys.push(key)
  for (const key of keysOf(entries)) keys.push(key)
  if (actBy > 0) args.push('@', String(actBy))
  if (tail !== undefined && tail !== patterns!.table.bare) {
    const values = tail.split(';').slice(1)
    args.push('=', String(values.length), ...values)
  }
  if (controls.length > 0) args.push('~', String(controls.length))
  // a cost per pair goes first, as batch.lua's '$' for the call that follows
  if (typeof cost !== 'number') args.push('$', String(cost.length), ...cost.map(String))
  args.push(op, typeof cost === 'number' ? String(cost) : '0', String(entries.length))
  for (const e of entries) args.push(...pairArgs(e))
  for (const e of entries) if (e.policy.penalty) keys.push(penaltyKey(e.key))
  args.push(...penaltyArgs(entries)!)
  return { keys, args }
}

/**
 * KEYS and ARGV of a reset (reset.lua): the keys it deletes, every pair's and the penalty state of the
 * pairs that have one; then each compact pair's levels, whose fields it deletes.
 */
export function resetCall(entries: readonly StoreEntry[]): { keys: string[]; args: string[] } {
  const keys: string[] = []
  const args: string[] = []
  for (const e of entries) if (!isCompact(e)) keys.push(e.key)
  for (const e of entries) if (e.policy.penalty) keys.push(penaltyKey(e.key))
  if (entries.some(isCompact)) {
    args.push(String(keys.length))
    for (const e of entries) {
      if (!isCompact(e)) continue
      keys.push(...e.levels)
      args.push(fieldOf(e))
    }
  }
  return { keys, args }
}

/**
 * What consume.lua answers in place of `allowed` (and batch.lua for a call) when the script started
 * after the call's act-by time: nothing was read or changed.
 */
export const EXPIRED = -2

/** The error a caller still waiting gets for an {@link EXPIRED} call: not applied, so the failure policy answers. */
export function expiredError(): StoreError {
  return new StoreError('the call reached Redis after its deadline and was not applied')
}

/** Whether a consume reply is {@link EXPIRED}: `{ now_us, -2 }`. */
export function isExpired(reply: unknown): boolean {
  return Array.isArray(reply) && reply.length === 2 && Number(reply[1]) === EXPIRED
}

/** A consume or peek reply: now_us, allowed, then 5 integers per pair. */
export function parseReply(reply: unknown, pairs: number): StoreReply {
  if (!Array.isArray(reply) || reply.length !== 2 + 5 * pairs) {
    throw new StoreError(`unexpected script reply: ${JSON.stringify(reply)?.slice(0, 200)}`)
  }
  return { nowUs: Number(reply[0]), results: decodePairs(reply, 2, pairs) }
}

/**
 * The results of `pairs` pairs from `reply[at]` on, 5 integers each: allowed (0|1, or 2 + 2 * the
 * overridden limit + allowed), remaining, reset_ms, retry_ms, tag. The one layout of consume.lua's replies and of each call's in batch.lua's; the caller
 * checks the reply holds them.
 */
export function decodePairs(reply: readonly unknown[], at: number, pairs: number): StoreResult[] {
  const results = new Array<StoreResult>(pairs)
  for (let i = 0; i < pairs; i++) {
    const b = at + i * 5
    const allowed = Number(reply[b])
    // 2 + 2 * limit + allowed: the identity's stored override set this pair's limit (control.lua).
    // Literals, not a spread plus `limit`: that makes V8 build a fresh hidden class per result.
    results[i] =
      allowed < 2
        ? {
            allowed: allowed === 1,
            remaining: Number(reply[b + 1]),
            resetMs: Number(reply[b + 2]),
            retryAfterMs: Number(reply[b + 3]),
            tag: Number(reply[b + 4]),
          }
        : {
            allowed: allowed % 2 === 1,
            remaining: Number(reply[b + 1]),
            resetMs: Number(reply[b + 2]),
            retryAfterMs: Number(reply[b + 3]),
            tag: Number(reply[b + 4]),
            limit: (allowed - 2 - (allowed % 2)) / 2,
          }
  }
  return results
}
