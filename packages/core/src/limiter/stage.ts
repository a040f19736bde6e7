/**
 * The limiter's optional features as stages of one decision path. Each stage (the reserve, the deny
 * cache, penalties, shadow policies, the top refused identities) is one object with the hooks it needs, composed when the limiter is
 * built and absent when not configured; `pipeline.ts` runs them around the one store call.
 * @module
 */
import type { CallOptions, Decision, PairCost, RefundToken, StoreEntry, StoreErrorPolicy } from '../types'

/** One consume or peek on its way through the stages. */
export interface Call {
  readonly entries: StoreEntry[]
  readonly cost: PairCost
  readonly options: CallOptions | undefined
  /** Monotonic ms before anything was done for the call (0 for a peek nobody traces). */
  readonly started: number
  /** The failure policy answering if the store fails. */
  readonly policy: StoreErrorPolicy
  /** Every policy is in shadow for this call (the limiter's or the call's `shadow`). */
  readonly allShadow: boolean
  /** The call's Redis keys as one string: the deny cache's and the reserve's key ('' if neither is on). */
  readonly signature: string
  /** Whether the reserve serves this call (set by its first stage, read by the second). */
  reserved: boolean
  /** Whether a refusal of this call may be remembered: a later stage can say it must reach the store. */
  cacheable: boolean
}

/**
 * One feature on the decision path. Every hook is optional; a stage has only those it needs.
 * - `before`: on the way to the store, in order. A decision (or its promise) answers the call there:
 *   neither the store nor any `after` hook runs.
 * - `after`: on the store's decision, in reverse order; returns the decision to answer with (itself, or
 *   one it made with a further store call). Not run on the failure policy's answers.
 * - `peeked`: on a peek's decision, in order.
 * - `refused`: on every refusal a consume answers with, wherever it was made (store, deny cache, reserve).
 * - `refunded`: after a decision's refund was applied in the store.
 * - `forget`: on `reset()` of the call's keys.
 * - `unblocked`: on `unblock()`: what the stage remembers of refusals by blocks goes.
 * - `overridden`: on a change of overrides: what the stage remembers of refusals goes (they were made
 *   under other limits).
 */
export interface Stage {
  before?(call: Call): Decision | Promise<Decision> | undefined
  after?(call: Call, decision: Decision): Decision | Promise<Decision>
  peeked?(call: Call, decision: Decision): Decision
  refused?(call: Call, decision: Decision): void
  refunded?(decision: Decision, token: RefundToken, cost: PairCost): void
  forget?(signature: string): void
  unblocked?(): void
  overridden?(): void
}

/** The deny cache's and the reserve's key: the call's Redis keys (one string, no join for one policy). */
export function signatureOf(entries: readonly StoreEntry[]): string {
  if (entries.length === 1) return entries[0]!.key
  let s = entries[0]!.key
  for (let i = 1; i < entries.length; i++) s += `\n${entries[i]!.key}`
  return s
}
