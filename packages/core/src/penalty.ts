/**
 * Penalties and lockouts: a policy's `penalty` blocks a (policy, identity) pair once the policy has
 * refused it `after` times within `within`, for `block`, growing by `factor` on repeat offences up to
 * `max`. Validation, the script arguments, and the in-memory twin of `lua/penalty.lua`.
 * See docs/algorithms.md#penalties-and-lockouts.
 * @module
 */
import { parseDuration } from './duration'
import { ConfigError } from './errors'
import type { ResolvedPenalty, StoreEntry } from './types'

const PENALTY_KEYS = ['after', 'within', 'block', 'factor', 'max', 'forget']
/** The most refusals a penalty may wait for (a count kept in the state string). */
export const MAX_PENALTY_AFTER = 1_000_000
const DAY_MS = 86_400_000

/**
 * Validates a policy's `penalty` option (`path` is the policy's option path, e.g. `policies.login.`).
 *
 * @example
 * resolvePenalty({ after: 3, block: '15m', factor: 2, max: '1d' }, 'policies.login.', 900000)
 * // { after: 3, withinMs: 900000, blockMs: 900000, factor: 2, maxMs: 86400000, forgetMs: 86400000 }
 */
export function resolvePenalty(value: unknown, path: string, windowMs: number): ResolvedPenalty {
  const at = `${path}penalty`
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(at, "an object like { after: 3, block: '15m' }", value, 'type')
  }
  for (const name of Object.keys(value)) {
    if (!PENALTY_KEYS.includes(name)) {
      throw new ConfigError(`${at}.${name}`, `a known option (${PENALTY_KEYS.join(', ')})`, name, 'type')
    }
  }
  const o = value as Record<string, unknown>
  const after = o.after ?? 1
  if (!Number.isSafeInteger(after) || (after as number) < 1 || (after as number) > MAX_PENALTY_AFTER) {
    throw new ConfigError(`${at}.after`, `an integer from 1 to ${MAX_PENALTY_AFTER}`, o.after)
  }
  if (o.block === undefined)
    throw new ConfigError(`${at}.block`, "a duration such as '15m'", undefined, 'type')
  const blockMs = parseDuration(o.block, `${at}.block`)
  const withinMs = o.within === undefined ? windowMs : parseDuration(o.within, `${at}.within`)
  const factor = o.factor ?? 1
  if (typeof factor !== 'number' || !(factor >= 1 && factor <= 100)) {
    throw new ConfigError(`${at}.factor`, 'a number from 1 to 100', o.factor)
  }
  const maxMs =
    o.max === undefined
      ? factor === 1
        ? blockMs
        : Math.max(blockMs, DAY_MS)
      : parseDuration(o.max, `${at}.max`)
  if (maxMs < blockMs) throw new ConfigError(`${at}.max`, `at least block (${blockMs} ms)`, o.max)
  const forgetMs =
    o.forget === undefined ? (factor === 1 ? 0 : maxMs) : parseDuration(o.forget, `${at}.forget`)
  return { after: after as number, withinMs, blockMs, factor, maxMs, forgetMs }
}

// A penalty's seven ARGV strings but the pair index never change: built once per penalty.
const ARGS = new WeakMap<ResolvedPenalty, readonly string[]>()

/**
 * The penalty part of a call's ARGV (see lua/batch.lua, ops 'C' and 'P'): m, then per penalised pair its
 * 1-based index and six numbers. Undefined when no pair of the call has a penalty.
 */
export function penaltyArgs(entries: readonly StoreEntry[]): string[] | undefined {
  let out: string[] | undefined
  for (let i = 0; i < entries.length; i++) {
    const p = entries[i]!.policy.penalty
    if (p === undefined) continue
    let args = ARGS.get(p)
    if (!args) {
      args = [p.after, p.withinMs, p.blockMs, p.factor, p.maxMs, p.forgetMs].map(String)
      ARGS.set(p, args)
    }
    out ??= ['0']
    out.push(String(i + 1), ...args)
  }
  if (out) out[0] = String((out.length - 1) / 7)
  return out
}

/** The tag of a blocked pair in a store's reply (a refused pair's tag is otherwise unused). */
export const BLOCKED_TAG = -1

/** Whether any pair of the call has a penalty. */
export function hasPenalty(entries: readonly StoreEntry[]): boolean {
  for (let i = 0; i < entries.length; i++) if (entries[i]!.policy.penalty !== undefined) return true
  return false
}

/** A pair's penalty state (the twin of the `<key>!p` string). */
export interface PenaltyState {
  readonly until: number
  readonly level: number
  readonly count: number
  readonly since: number
}

/** A pair's numbers as the twin handles them (mutable, like the scripts' result tables). */
interface Numbers {
  allowed: boolean
  remaining: number
  resetMs: number
  retryMs: number
  tag: number
}

/** The length of the block at `level` (twin of pen_length). */
export function blockLength(level: number, p: ResolvedPenalty): number {
  let d = Math.min(p.blockMs, p.maxMs)
  for (let i = 2; i <= level; i++) {
    if (d >= p.maxMs) break
    d = Math.min(p.maxMs, Math.floor(d * p.factor))
  }
  return d
}

/** A pair's numbers while it is blocked for `left` more ms (twin of pen_blocked). */
export function applyBlock(r: Numbers, left: number): void {
  r.allowed = false
  r.remaining = 0
  r.tag = BLOCKED_TAG
  if (r.retryMs !== -1 && r.retryMs < left) r.retryMs = left
  if (r.resetMs < left) r.resetMs = left
}

/**
 * After the call was decided, a pair that is not blocked and was refused by its own policy: counts the
 * refusal and, at `after`, starts a block (twin of pen_settle). Returns the new state and its expiry.
 */
export function countRefusal(
  state: PenaltyState | undefined,
  nowMs: number,
  p: ResolvedPenalty,
): { state: PenaltyState; expiresAtMs: number } {
  let { until, level, count, since } = state ?? { until: 0, level: 0, count: 0, since: 0 }
  if (count === 0 || nowMs - since >= p.withinMs) {
    count = 0
    since = nowMs
  }
  count++
  if (level > 0 && nowMs >= until + p.forgetMs) level = 0
  let expiresAtMs = since + p.withinMs
  if (count >= p.after) {
    if (level === 0 || blockLength(level, p) < p.maxMs) level++
    until = nowMs + blockLength(level, p)
    count = 0
    since = nowMs
    expiresAtMs = until + p.forgetMs
  } else if (level > 0) {
    expiresAtMs = Math.max(expiresAtMs, until + p.forgetMs)
  }
  return { state: { until, level, count, since }, expiresAtMs }
}
