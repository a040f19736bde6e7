/**
 * What the failure policy answers when the store failed or the circuit is open: `'allow'` and `'deny'`
 * without quota numbers, `'local'` from an in-process `MemoryStore` holding a share of each quota.
 * See docs/failure-modes.md.
 * @module
 */
import { maxCost } from '../cost'
import { StoreError, StoreTimeoutError } from '../errors'
import { emit, type TollgateEvent } from '../events'
import { storeFaultOf } from '../store-fault'
import { MemoryStore } from '../stores/memory-store'
import type { Decision, PairCost, ResolvedPolicy, StoreEntry, StoreErrorPolicy } from '../types'
import type { CircuitBreaker } from './breaker'
import { type DecisionContext, decide } from './decision'
import { MIB } from './options'
import type { StoreCalls } from './store-calls'

/** The answer of `'allow'` or `'deny'`: no pairs, and a refusal waits out the breaker's cool-down. */
function failureAnswer(allowed: boolean, cost: PairCost, breaker: CircuitBreaker): Decision {
  return {
    allowed,
    limit: 0,
    remaining: 0,
    resetMs: 0,
    retryAfterMs: allowed ? 0 : breaker.retryInMs(),
    cost: maxCost(cost),
    policies: [],
    binding: -1,
    source: 'fallback',
  }
}

/** A policy with `share` of its quota (never below one unit). */
function shareOf(p: ResolvedPolicy, share: number): ResolvedPolicy {
  return {
    ...p,
    limit: Math.max(1, Math.floor(p.limit * share)),
    burst: Math.max(1, Math.floor(p.burst * share)),
  }
}

/**
 * A limiter's failure policy. The `'local'` one runs the limiter's algorithms in process, with a strict
 * share of each quota.
 */
export class Fallback {
  /** The local store, created at the first `'local'` answer. @internal */
  store: MemoryStore | undefined
  /** The local share of each policy, by name. */
  readonly policies: ReadonlyMap<string, ResolvedPolicy>
  private readonly share: number
  private readonly capacity: { maxKeys: number; maxBytes: number }

  constructor(
    private readonly ctx: DecisionContext,
    policies: readonly ResolvedPolicy[],
    local: { share: number; capacity: { maxKeys?: number; maxBytes?: number } },
    private readonly leases: boolean,
    private readonly calls: StoreCalls,
    private readonly onEvent: ((event: TollgateEvent) => void) | undefined,
  ) {
    const { share, capacity } = local
    this.share = share
    this.capacity = { maxKeys: capacity.maxKeys ?? 10_000, maxBytes: capacity.maxBytes ?? 4 * MIB }
    this.policies = new Map(policies.map((p) => [p.name, shareOf(p, share)]))
  }

  /** The decision of the failure policy, when the store failed or the circuit is open. */
  async decide(
    error: unknown,
    entries: StoreEntry[],
    cost: PairCost,
    policy: StoreErrorPolicy,
    spend: boolean,
  ): Promise<Decision> {
    if (!(error instanceof StoreError || error instanceof StoreTimeoutError)) throw error
    // An error about this key's data is not an outage, and is never admitted uncounted: under 'allow'
    // the local fallback counts it ('deny' still refuses).
    if (policy === 'allow' && storeFaultOf(error) === 'data') policy = 'local'
    const decision =
      policy === 'local'
        ? await this.local(entries, cost, spend)
        : failureAnswer(policy === 'allow', cost, this.calls.breakerFor(entries))
    const { limiter, prefix } = this.calls
    emit(this.onEvent, { type: 'fallback', limiter, prefix, policy, allowed: decision.allowed })
    return decision
  }

  /** Consumes (`spend`) or peeks in the local store. */
  private async local(entries: readonly StoreEntry[], cost: PairCost, spend: boolean): Promise<Decision> {
    this.store ??= new MemoryStore(this.capacity)
    const local = entries.map((e) => ({ ...e, policy: this.policyOf(e.policy) }))
    const reply = spend ? await this.store.consume(local, cost) : await this.store.peek(local, cost)
    // A spend token only when leases were taken: release() ends them in the local store.
    return decide(this.ctx, local, cost, reply, spend && this.leases, 'fallback')
  }

  /** Gives leases back in the local store (nothing if it was never used). */
  async release(entries: readonly StoreEntry[], tags: readonly number[], cost: PairCost): Promise<void> {
    await this.store?.refund(entries, tags, cost)
  }

  /** The local share of a policy (of a per-call limit too). */
  private policyOf(p: ResolvedPolicy): ResolvedPolicy {
    if (this.ctx.policyByName.get(p.name) === p) return this.policies.get(p.name)!
    return shareOf(p, this.share)
  }
}
