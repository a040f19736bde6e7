/**
 * The local deny cache: refusals remembered in-process, so a client hammering a closed gate costs no
 * round trip. See docs/failure-modes.md.
 * @module
 */
import { costAt } from '../cost'
import { monotonicMs } from '../deadlines'
import { CHANNELS, emit, type TollgateEvent } from '../events'
import type { Decision, PairCost, PolicyDecision, StoreEntry } from '../types'
import { rateRetryMs } from './decision'
import type { Call, Stage } from './stage'

interface CachedDenial<D> {
  /** When the store refused (monotonic ms, taken before the call). */
  readonly at: number
  /** When this entry stops being used: the retry time, or `at + maxMs` if sooner. */
  readonly until: number
  readonly cost: PairCost
  readonly decision: D
  readonly bytes: number
}

// The heap bytes of one entry besides its signature and decision, as V8 lays it out: the entry object
// with its two boxed times (96), and its share of the Map's table at worst (112: 28 per slot, and V8
// shrinks a Map's table only once it is less than a quarter full).
const ENTRY_BYTES = 208

/**
 * Remembers refusals so a client hammering a closed gate costs no round trip. Only ever denies: an entry
 * is used for a cost at least as large as the refused one, and never past the refusal's retry time
 * measured from before the store call. It is also used for at most `maxMs`: a `reset()` in another process,
 * or keys deleted in Redis, is seen by every process within that. Bounded by entries and by bytes (the
 * caller charges each decision; signatures at two bytes a char): the oldest entry goes first, and as entries
 * live at most `maxMs`, the oldest is also about the first to expire.
 */
export class DenyCache<D> {
  private readonly entries = new Map<string, CachedDenial<D>>()
  private used = 0
  constructor(
    readonly maxEntries: number,
    readonly maxBytes: number,
    readonly maxMs: number,
  ) {}

  get(signature: string, cost: PairCost, now: number): CachedDenial<D> | undefined {
    // most calls meet an empty cache: no hash of the signature then
    if (this.entries.size === 0) return undefined
    const hit = this.entries.get(signature)
    if (!hit) return undefined
    if (hit.until <= now) {
      this.delete(signature)
      return undefined
    }
    // a refusal holds for a cost at least as large on every pair
    if (typeof cost === 'number' && typeof hit.cost === 'number') return cost >= hit.cost ? hit : undefined
    return atLeast(cost, hit.cost) ? hit : undefined
  }

  /**
   * Caches a refusal made at `at` (before the store call) that may be retried after `retryMs`.
   * `decisionBytes` is what the caller estimates the decision costs to keep.
   */
  set(
    signature: string,
    cost: PairCost,
    at: number,
    retryMs: number,
    decision: D,
    decisionBytes: number,
  ): void {
    this.delete(signature)
    const bytes = ENTRY_BYTES + 2 * signature.length + decisionBytes
    if (bytes > this.maxBytes) return
    const now = monotonicMs()
    for (const [key, entry] of this.entries) {
      if (entry.until > now && this.entries.size < this.maxEntries && this.used + bytes <= this.maxBytes)
        break
      this.delete(key)
    }
    this.entries.set(signature, { at, until: at + Math.min(retryMs, this.maxMs), cost, decision, bytes })
    this.used += bytes
  }

  /** Deletes every entry whose decision `matches`. */
  drop(matches: (decision: D) => boolean): void {
    for (const [signature, entry] of this.entries) if (matches(entry.decision)) this.delete(signature)
  }

  delete(signature: string): void {
    const entry = this.entries.get(signature)
    if (!entry) return
    this.entries.delete(signature)
    this.used -= entry.bytes
  }

  get size(): number {
    return this.entries.size
  }

  /** Bytes charged against `maxBytes`. */
  get bytes(): number {
    return this.used
  }
}

/** Whether every pair's cost in `a` is at least its cost in `b`. */
export function atLeast(a: PairCost, b: PairCost): boolean {
  const n = typeof a === 'number' ? (b as readonly number[]).length : a.length
  for (let i = 0; i < n; i++) if (costAt(a, i) < costAt(b, i)) return false
  return true
}

// The heap bytes of a cached refusal (the decision and its array) and of each policy's part, as V8 lays
// them out, rounded up; the cache adds its entry and the signature.
const DECISION_BYTES = 208
const POLICY_DECISION_BYTES = 200

/**
 * Caches a store's refusal made at `at`, with `signature`. A concurrency refusal (`leases`) lasts until
 * a holder releases, which no retry time predicts: cached only as long as a rate policy refuses too. A
 * block's refusal is cached at most the shortest window of its policies (and `maxMs`).
 */
export function rememberRefusal(
  cache: DenyCache<Decision>,
  signature: string,
  cost: PairCost,
  at: number,
  decision: Decision,
  leases: boolean,
): void {
  let cacheMs = leases ? rateRetryMs(decision) : decision.retryAfterMs
  // a block ends early on `unblock`: kept no longer than a refusal by the pair's own window could be
  if (decision.source === 'block') for (const p of decision.policies) cacheMs = Math.min(cacheMs, p.windowMs)
  if (cacheMs <= 0) return
  const bytes = DECISION_BYTES + POLICY_DECISION_BYTES * decision.policies.length
  cache.set(signature, cost, at, cacheMs, withoutIdentities(decision), bytes)
}

/** Whether a cached decision was made under the limits of this call's entries. */
export function sameLimits(decision: Decision, entries: readonly StoreEntry[]): boolean {
  const policies = decision.policies
  for (let i = 0; i < policies.length; i++) if (policies[i]!.limit !== entries[i]!.policy.burst) return false
  return true
}

/**
 * What the deny cache keeps of a refusal: not the identities, which can be long (the keys, in the cache's
 * signature, hash long identities); a hit gets them back from its own call.
 */
function withoutIdentities(decision: Decision): Decision {
  return { ...decision, policies: decision.policies.map((p) => ({ ...p, key: '' })) }
}

/** A cached refusal made `elapsedMs` ago, with its times counted down and the call's identities. */
export function cached(decision: Decision, elapsedMs: number, entries: readonly StoreEntry[]): Decision {
  const elapsed = Math.max(0, elapsedMs)
  // a loop, not map(): no closure per hit
  const held = decision.policies
  const policies: PolicyDecision[] = []
  for (let i = 0; i < held.length; i++) {
    const p = held[i]!
    const key = entries[i]!.identity ?? entries[i]!.key
    policies.push(
      p.allowed
        ? { ...p, key }
        : {
            ...p,
            key,
            retryAfterMs: Math.max(1, Math.ceil(p.retryAfterMs - elapsed)),
            resetMs: Math.max(0, Math.ceil(p.resetMs - elapsed)),
          },
    )
  }
  return {
    ...decision,
    policies,
    retryAfterMs: Math.max(1, Math.ceil(decision.retryAfterMs - elapsed)),
    resetMs: Math.max(0, Math.ceil(decision.resetMs - elapsed)),
    source: 'cache',
  }
}

/**
 * The deny cache as a stage: a call whose refusal is remembered is answered before the store; a refusal
 * of the store is remembered unless a later stage said it must reach the store again (`call.cacheable`).
 */
export class DenyCacheStage implements Stage {
  constructor(
    readonly cache: DenyCache<Decision>,
    /** The limiter holds leases: a concurrency refusal is remembered only with a rate policy's. */
    private readonly leases: boolean,
    private readonly who: {
      readonly name: string
      readonly prefix: string
      readonly onEvent: ((event: TollgateEvent) => void) | undefined
    },
  ) {}

  before(call: Call): Decision | undefined {
    const hit = this.cache.get(call.signature, call.cost, call.started)
    // a refusal under other limits (per-call `limits`: a plan just upgraded) says nothing about this call
    if (hit === undefined || !sameLimits(hit.decision, call.entries)) return undefined
    const { name, prefix, onEvent } = this.who
    if (onEvent || CHANNELS['cache-hit']?.hasSubscribers)
      emit(onEvent, { type: 'cache-hit', limiter: name, prefix })
    return cached(hit.decision, call.started - hit.at, call.entries)
  }

  after(call: Call, decision: Decision): Decision {
    // a refusal made for a call in shadow refuses nothing: the next call must reach the store
    if (decision.allowed || !call.cacheable || call.allShadow || !Number.isFinite(decision.retryAfterMs))
      return decision
    rememberRefusal(this.cache, call.signature, call.cost, call.started, decision, this.leases)
    return decision
  }

  forget(signature: string): void {
    this.cache.delete(signature)
  }

  unblocked(): void {
    this.cache.drop((decision) => decision.source === 'block')
  }

  overridden(): void {
    this.cache.drop(() => true)
  }
}
