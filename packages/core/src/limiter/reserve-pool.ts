/**
 * A key's reserved units in this process, and the decisions drawn from them (reserve.ts takes and
 * places the units).
 * @module
 */
import { maxCost } from '../cost'
import type { Decision, PairCost, PolicyDecision, StoreEntry, StoreReply } from '../types'
import { bindingOf, nextSpendSeq, spendNonce } from './decision'
import { atLeast } from './deny-cache'

/** What a refill settles for the callers that awaited it. */
export type Refilled =
  | undefined
  | { readonly refused: Decision; readonly cost: PairCost }
  | { readonly error: unknown }

/** One key's units in this process, per pair of the call (policy declaration order). */
export interface Pool {
  /** Units taken and not admitted yet. */
  readonly left: number[]
  /**
   * When they lapse (monotonic ms): the end of the store window they were taken in, counted from before
   * the store call, so never later than the store's own end.
   */
  readonly endsAt: number[]
  /**
   * The store window each pair's units were taken in (the reply's tag), in the array the draws' refund
   * tokens share: replaced whenever one changes, so a token names the windows it was drawn in.
   */
  tags: readonly number[]
  /** The store's remaining after the last refill (every process's units counted as spent). */
  readonly remaining: number[]
  /** When the pair is back to its full quota, as the last refill's reply said (monotonic ms). */
  readonly resetAt: number[]
  /** The store refused a whole reserve in this window: the next refills take what a call costs. */
  readonly edge: boolean[]
  /** Whether a refill is in flight (one per key at a time). */
  refilling: boolean
  /**
   * Whether the callers waiting are about to be woken (a refill went ahead of them, reserve.ts): meanwhile
   * a new call queues behind them instead of drawing their units.
   */
  waking: boolean
  /**
   * Whether every call drawing from the pool so far cost 1: then the callers waiting are as many units
   * as they will draw, and a refill can be asked for before they are served (reserve.ts).
   */
  unit: boolean
  /**
   * The callers the pool could not serve while a refill was in flight, in arrival order. They wake one
   * at a time: each draws from the refilled units and wakes the next, and the first the units cannot
   * serve refills, so a refill of N units wakes about N callers, not every caller waiting.
   */
  readonly waiting: Array<(outcome: Refilled) => void>
  readonly signature: string
  readonly keys: readonly string[]
}

/** Wakes the first caller waiting on `pool` with the refill's outcome; returns `value`. */
export function wakeNext<T>(pool: Pool, outcome: Refilled, value: T): T {
  const next = pool.waiting.shift()
  if (next !== undefined) next(outcome)
  return value
}

/** The signature of a spend's keys, as the limiter builds it from its entries (stage.ts). */
export function signatureOfKeys(keys: readonly string[]): string {
  return keys.length === 1 ? keys[0]! : keys.join('\n')
}

export function allAllowed(reply: StoreReply): boolean {
  for (const r of reply.results) if (!r.allowed) return false
  return true
}

/** Whether `a` costs at least `b` on every pair. */
export function atLeastCost(a: PairCost, b: PairCost): boolean {
  return typeof a === 'number' && typeof b === 'number' ? a >= b : atLeast(a, b)
}

/** A decision about the call's `cost` when the store answered for another amount. */
export function withCost(decision: Decision, cost: PairCost): Decision {
  const asked = maxCost(cost)
  return decision.cost === asked ? decision : { ...decision, cost: asked }
}

/** The decision of a draw of `cost` from `pool` at `now`. */
export function drawn(pool: Pool, entries: readonly StoreEntry[], cost: PairCost, now: number): Decision {
  const n = entries.length
  const policies: PolicyDecision[] = new Array(n)
  for (let i = 0; i < n; i++) {
    const p = entries[i]!.policy
    policies[i] = {
      policy: p.name,
      key: entries[i]!.identity ?? entries[i]!.key,
      algorithm: p.algorithm,
      allowed: true,
      limit: p.burst,
      windowMs: p.windowMs,
      remaining: pool.remaining[i]! + pool.left[i]!,
      resetMs: Math.max(0, Math.ceil(pool.resetAt[i]! - now)),
      retryAfterMs: 0,
    }
  }
  const binding = n === 1 ? 0 : bindingOf(policies, true, undefined)
  const b = policies[binding]!
  const max = typeof cost === 'number' ? cost : maxCost(cost)
  return {
    allowed: true,
    limit: b.limit,
    remaining: b.remaining,
    resetMs: b.resetMs,
    retryAfterMs: 0,
    cost: max,
    policies,
    binding,
    source: 'reserve',
    refundToken: {
      keys: pool.keys,
      tags: pool.tags,
      cost: max,
      costs: typeof cost === 'number' ? undefined : cost,
      nonce: spendNonce(),
      seq: nextSpendSeq(),
    },
  }
}
