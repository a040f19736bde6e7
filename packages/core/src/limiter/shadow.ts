/**
 * Shadow policies: decided, counted and reported, never refusing. A refusal only shadow policies made is
 * turned into a pass marked `decision.shadow`; when they alone refused an atomic call (which then spent
 * nothing), the enforced policies are charged on their own (the stage at the end of this file).
 * @module
 */
import { pickCost } from '../cost'
import type { Decision, PairCost, StoreEntry, StoreErrorPolicy } from '../types'
import { decide } from './decision'
import type { Call, Stage } from './stage'
import type { StorePath } from './store-path'

/** Whether every policy that refused is in shadow. */
export function onlyShadowRefused(decision: Decision, names: ReadonlySet<string>): boolean {
  for (const p of decision.policies) if (!p.allowed && !names.has(p.policy)) return false
  return true
}

/** A decision with its shadow policies' refusals marked, and turned into a pass if only they refused. */
export function shadowed(
  decision: Decision,
  allShadow: boolean,
  names: ReadonlySet<string> | undefined,
  policyNames: readonly string[],
): Decision {
  let shadow: string[] | undefined
  let enforcedRefused = false
  if (decision.policies.length === 0) {
    // A failure-policy answer ('allow' / 'deny') has no pairs: it refuses for every policy.
    if (decision.allowed || !allShadow) return decision
    return withShadow(decision, policyNames, true)
  }
  for (const p of decision.policies) {
    if (p.allowed) continue
    if (!allShadow && !names!.has(p.policy)) enforcedRefused = true
    else if (shadow === undefined) shadow = [p.policy]
    else shadow.push(p.policy)
  }
  if (shadow === undefined) return decision
  return withShadow(decision, shadow, !enforcedRefused && !decision.allowed)
}

/**
 * `{ ...decision, shadow }`, or `{ ...decision, allowed: true, retryAfterMs: 0, shadow }` for a pass,
 * built by Object.assign and assignments: a spread followed by a new name makes V8 build a fresh hidden
 * class on every call.
 */
function withShadow(decision: Decision, shadow: readonly string[], pass: boolean): Decision {
  const out: { -readonly [K in keyof Decision]: Decision[K] } = Object.assign({}, decision)
  if (pass) {
    out.allowed = true
    out.retryAfterMs = 0
  }
  out.shadow = shadow
  return out
}

/** The enforced pairs of a call, and their indexes in it. */
export function enforcedPairs(
  entries: readonly StoreEntry[],
  names: ReadonlySet<string>,
): { enforced: StoreEntry[]; picked: number[] } {
  const enforced: StoreEntry[] = []
  const picked: number[] = []
  for (let i = 0; i < entries.length; i++) {
    if (names.has(entries[i]!.policy.name)) continue
    enforced.push(entries[i]!)
    picked.push(i)
  }
  return { enforced, picked }
}

/**
 * The whole call's decision from the shadow policies' verdicts in `first` and the enforced policies'
 * charge in `second`, made on `enforced` alone.
 */
export function withShadowVerdicts(
  entries: readonly StoreEntry[],
  names: ReadonlySet<string>,
  first: Decision,
  second: Decision,
  enforced: readonly StoreEntry[],
): Decision {
  let j = 0
  const policies = entries.map((e, i) =>
    names.has(e.policy.name) ? first.policies[i]! : second.policies[j++]!,
  )
  const token = second.refundToken
  return {
    ...second,
    policies,
    // The binding pair is among the enforced ones: its index in the whole call.
    binding: entries.indexOf(enforced[second.binding]!),
    refundToken: token && { ...token, policies: enforced.map((e) => e.policy.name) },
  }
}

/**
 * The second call of a limiter mixing enforced and shadow policies, made only when shadow policies
 * alone refused the first (which spent nothing): the enforced policies spend as if the shadow ones did
 * not exist, and the shadow ones stay unspent, as they would be if enforced.
 */
export async function chargeEnforced(
  via: StorePath,
  names: ReadonlySet<string>,
  entries: StoreEntry[],
  allCost: PairCost,
  first: Decision,
  policy: StoreErrorPolicy,
): Promise<Decision> {
  const { enforced, picked } = enforcedPairs(entries, names)
  const cost = pickCost(allCost, picked)
  let second: Decision
  try {
    const reply = await via.calls.run(
      enforced,
      () => via.store.consume(enforced, cost, via.calls.deadlines.timeoutMs),
      'consume',
    )
    second = decide(via.ctx, enforced, cost, reply, true, 'store')
  } catch (error) {
    second = await via.fallback.decide(error, enforced, cost, policy, true)
    if (second.policies.length === 0) return second
  }
  return withShadowVerdicts(entries, names, first, second, enforced)
}

/**
 * Shadow policies mixed with enforced ones, as a stage: when shadow policies alone refused, the enforced
 * ones are charged on their own, and that answer is not remembered by the deny cache (nor is any refusal
 * of a call in shadow: the next call must reach the store).
 */
export class ShadowStage implements Stage {
  constructor(
    private readonly names: ReadonlySet<string>,
    private readonly via: StorePath,
  ) {}

  after(call: Call, decision: Decision): Decision | Promise<Decision> {
    if (decision.allowed || call.allShadow || !onlyShadowRefused(decision, this.names)) return decision
    call.cacheable = false
    return chargeEnforced(this.via, this.names, call.entries, call.cost, decision, call.policy)
  }
}
