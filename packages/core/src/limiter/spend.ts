/**
 * What giving a spend back needs: the pairs a decision spent on (under the limits it was made under),
 * a spend's id so the store applies each spend's refunds at most once, and the leases a decision holds.
 * @module
 */
import { collapse, costAt } from '../cost'
import { InputError, StoreError, StoreTimeoutError } from '../errors'
import type { LimitOverrides } from '../limits'
import type { Decision, PairCost, RefundToken, ResolvedPolicy, SpendOnce, StoreEntry } from '../types'
import { amountsOf } from './amounts'

/**
 * Whether a decision spent in the store, so that a refund or a settle has something to give back: made
 * there, or drawn from units taken from it (`reserve`).
 */
export function spentFromStore(decision: Decision): boolean {
  return decision.source === 'store' || decision.source === 'reserve'
}

/**
 * The spend's name for the store: its units given back, under this id, never exceed `spent`. The id
 * comes from the token alone, so every copy of a decision (another process's included) names one spend.
 */
export function spendOnce(token: RefundToken, spent: PairCost, settle?: true): SpendOnce {
  const { nonce, seq } = token
  // the id names a Redis key: only what spendNonce() and nextSpendSeq() make
  if (typeof nonce !== 'string' || !/^[\w-]{12}$/.test(nonce))
    throw new InputError('decision.refundToken.nonce', 'the 12 characters a limiter gave it', nonce)
  if (!Number.isSafeInteger(seq) || seq < 1)
    throw new InputError('decision.refundToken.seq', 'a positive safe integer', seq)
  const id = nonce + seq.toString(36)
  return settle ? { id, spent, settle } : { id, spent }
}

/** The pairs a decision spent on; `rates`: without concurrency policies. */
export interface Spent {
  entries: StoreEntry[]
  tags: number[]
  /** Each pair's index in the token. */
  picked: number[]
}

/** The (policy, key) pairs a decision spent on and their tags; `rates`: without concurrency policies. */
export function spentEntries(
  decision: Decision,
  token: RefundToken,
  rates: boolean,
  byName: ReadonlyMap<string, ResolvedPolicy>,
  overrides: LimitOverrides,
): Spent {
  const names = token.policies
  const entries: StoreEntry[] = []
  const tags: number[] = []
  const picked: number[] = []
  for (let i = 0; i < token.keys.length; i++) {
    const name = names ? names[i] : decision.policies[i]?.policy
    const policy = name === undefined ? undefined : byName.get(name)
    if (!policy) throw new InputError('decision', 'a decision made by this limiter', name)
    if (rates && policy.algorithm === 'concurrency') continue
    // a spend under a per-call limit is given back (or settled) under that limit
    entries.push({ policy: overrides.spentUnder(policy, token.limits?.[i]), key: token.keys[i]! })
    tags.push(token.tags[i]!)
    picked.push(i)
  }
  return { entries, tags, picked }
}

/** What a refund gives back: `asked` (a refund's `cost`) or all that was `charged`, never more. */
export function refundAmount(
  asked: unknown,
  entries: readonly StoreEntry[],
  charged: PairCost,
  byName: ReadonlyMap<string, ResolvedPolicy>,
): PairCost {
  if (asked === undefined) return charged
  const cost = amountsOf(asked, entries, 'cost', 0, byName)
  for (let i = 0; i < entries.length; i++) {
    const c = costAt(cost, i)
    if (c > costAt(charged, i)) {
      const name = typeof asked === 'number' ? 'cost' : `cost.${entries[i]!.policy.name}`
      throw new InputError(name, `at most the decision's cost (${costAt(charged, i)})`, c)
    }
  }
  return cost
}

/**
 * A settle's change per pair, signed: what goes back (> 0) or is charged more (< 0); sent even when 0,
 * so the spend is settled. A pair the record does not name is left as charged. With what each pair spent.
 */
export function settleDelta(
  token: RefundToken,
  { entries, picked }: Spent,
  actualCost: number | Readonly<Record<string, number>>,
): { delta: PairCost; spent: PairCost } {
  const record = typeof actualCost === 'number' ? undefined : actualCost
  const deltas = new Array<number>(entries.length)
  const spent = new Array<number>(entries.length)
  for (let i = 0; i < entries.length; i++) {
    spent[i] = token.costs ? token.costs[picked[i]!]! : token.cost
    const name = entries[i]!.policy.name
    if (record === undefined) deltas[i] = spent[i]! - (actualCost as number)
    else deltas[i] = Object.hasOwn(record, name) && record[name] !== undefined ? spent[i]! - record[name] : 0
  }
  return { delta: collapse(deltas), spent: collapse(spent) }
}

/** Spends whose leases were released in this process (a second release() costs no round trip). */
export const released = new WeakSet<RefundToken>()

/**
 * The leases a decision holds on its concurrency policies (looked up in `byName`: the store's policies,
 * or the local fallback's), with the slots each took. Undefined when it holds none.
 */
export function heldLeases(
  decision: Decision,
  token: RefundToken,
  byName: ReadonlyMap<string, ResolvedPolicy>,
): { entries: StoreEntry[]; tags: number[]; cost: PairCost } | undefined {
  const names = token.policies
  const entries: StoreEntry[] = []
  const tags: number[] = []
  const held: number[] = []
  for (let i = 0; i < token.keys.length; i++) {
    const name = names ? names[i] : decision.policies[i]?.policy
    const policy = name === undefined ? undefined : byName.get(name)
    if (!policy) throw new InputError('decision', 'a decision made by this limiter', name)
    if (policy.algorithm !== 'concurrency') continue
    entries.push({ policy, key: token.keys[i]! })
    tags.push(token.tags[i]!)
    held.push(token.costs ? token.costs[i]! : token.cost)
  }
  // each lease gives back the slots it took (its policy's cost)
  return entries.length === 0 ? undefined : { entries, tags, cost: collapse(held) }
}

/** A release that failed in the store leaves the lease to expire: only programming errors surface. */
export function ignoreStoreError(error: unknown): void {
  if (!(error instanceof StoreError || error instanceof StoreTimeoutError)) throw error
}
