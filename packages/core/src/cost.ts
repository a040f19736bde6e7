/**
 * A call's cost as the stores take it: one number for every pair, or one per pair when they differ
 * (a cost per policy: `{ cost: { tokens: n } }`).
 * @module
 */
import type { PairCost } from './types'

/** Pair `i`'s cost. */
export function costAt(cost: PairCost, i: number): number {
  return typeof cost === 'number' ? cost : cost[i]!
}

/** One number when every pair costs the same (or there is one pair): the common call's layout. */
export function collapse(costs: readonly number[]): PairCost {
  const first = costs[0] ?? 0
  for (let i = 1; i < costs.length; i++) if (costs[i] !== first) return costs
  return first
}

/** The cost of the pairs at indexes `picked` (a slot group, the enforced pairs of a call). */
export function pickCost(cost: PairCost, picked: readonly number[]): PairCost {
  if (typeof cost === 'number') return cost
  return collapse(picked.map((i) => cost[i]!))
}

/** The largest pair cost: what `decision.cost` reports. */
export function maxCost(cost: PairCost): number {
  if (typeof cost === 'number') return cost
  let max = 0
  for (const c of cost) if (c > max) max = c
  return max
}

/** Whether every pair's cost is 0 (the call charges nothing). */
export function isFree(cost: PairCost): boolean {
  return maxCost(cost) === 0
}
