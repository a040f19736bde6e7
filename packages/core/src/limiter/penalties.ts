/**
 * Penalties as a stage: a refusal the penalty still has to count must reach the store again, so the
 * deny cache may keep it only once every penalised pair that refused is blocked (a block counts nothing).
 * The penalty itself is counted by the store's script (penalty.ts, lua/includes/penalty.lua).
 * @module
 */
import type { Decision, StoreEntry } from '../types'
import type { Call, Stage } from './stage'

/**
 * Whether a refusal may be cached although a policy has a penalty: every penalised pair that refused is
 * blocked (a cached refusal never reaches the store, so one the penalty should count must go there).
 */
export function onlyBlocksCount(decision: Decision, entries: readonly StoreEntry[]): boolean {
  const policies = decision.policies
  for (let i = 0; i < policies.length; i++) {
    if (!policies[i]!.allowed && entries[i]!.policy.penalty && !policies[i]!.blocked) return false
  }
  return true
}

export class PenaltyStage implements Stage {
  after(call: Call, decision: Decision): Decision {
    if (!decision.allowed && !onlyBlocksCount(decision, call.entries)) call.cacheable = false
    return decision
  }
}
