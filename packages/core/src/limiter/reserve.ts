/**
 * `reserve`: units a process takes from the store at a time for a key, so that the key's next calls are
 * admitted without a round trip. Taken by an ordinary consume (the store counts them all at once, so
 * every process together stays within the limit) and lapsing with the window they were taken in (the
 * fixed and sliding windows count a unit in the window it was taken in only). See docs/reserve.md.
 * @module
 */
import { monotonicMs } from '../deadlines'
import type { CallOptions, Decision, PairCost, RefundToken, StoreEntry, StoreReply } from '../types'
import { nextSpendSeq } from './decision'
import { type DenyCache, rememberRefusal } from './deny-cache'

/** What a refill settles for the callers that awaited it. */
type Refilled =
  | undefined
  | { readonly refused: Decision; readonly cost: number }
  | { readonly error: unknown }

/** One key's units in this process. */
interface Pool {
  /** Units taken and not admitted yet. */
  left: number
  /**
   * When they lapse (monotonic ms): the end of the store window they were taken in, counted from before
   * the store call, so never later than the store's own end.
   */
  endsAt: number
  /** The store window they were taken in (the reply's tag), in the array the draws' refund tokens share. */
  tags: readonly number[]
  /** The store's remaining after the last refill (every process's units counted as spent). */
  remaining: number
  /** When the pair is back to its full quota, as the last refill's reply said (monotonic ms). */
  resetAt: number
  /** The store refused a whole reserve in this window: the next refills take what a call costs. */
  edge: boolean
  /** The refill in flight: callers the pool cannot serve await it (one refill per key at a time). */
  refilling: Promise<Refilled> | undefined
  readonly keys: readonly string[]
}

/** A refill's store calls, for the call's entry (the limiter's deadline, breaker and events). */
export interface Refill {
  consume(cost: number): Promise<StoreReply>
  /** The store's refusal as the decision to answer with. */
  refused(reply: StoreReply, cost: number): Decision
}

/** Units given back of a draw so far; `SETTLED`: settled, nothing more goes back. */
const SETTLED = -1

/** A single-policy limiter's reserves, one pool per key, bounded like the deny cache (no timers). */
export class Reserves {
  private readonly pools = new Map<string, Pool>()
  /** Per draw: what refunds gave back, or that it was settled (refunds of one draw stay within its cost). */
  private readonly returned = new WeakMap<RefundToken, number>()

  constructor(
    /** The policy's `reserve`: units taken per refill. */
    readonly units: number,
    readonly maxKeys: number,
    private readonly denyCache: DenyCache<Decision> | undefined,
  ) {}

  /** Whether a call goes through the reserve: a cost it can hold, under the policy's own limit. */
  covers(cost: PairCost, options: CallOptions | undefined): cost is number {
    return (
      typeof cost === 'number' &&
      cost >= 1 &&
      cost <= this.units &&
      (options === undefined || (options.limits === undefined && options.shadow !== true))
    )
  }

  /** `cost` admitted from the key's units, or undefined when they cannot cover it. */
  draw(entry: StoreEntry, cost: number, now: number): Decision | undefined {
    const pool = this.pools.get(entry.key)
    if (pool === undefined || pool.left < cost) return undefined
    if (pool.endsAt <= now) {
      pool.left = 0
      return undefined
    }
    pool.left -= cost
    return drawn(pool, entry, cost, now)
  }

  /**
   * Takes units from the store for the call (or awaits the key's refill in flight and draws from it),
   * then draws `cost`. Resolves to the admitted draw or the store's refusal; rejects with the store's error.
   */
  async take(entry: StoreEntry, cost: number, started: number, refill: Refill): Promise<Decision> {
    const key = entry.key
    let pool = this.pools.get(key)
    while (pool?.refilling !== undefined) {
      const outcome = await pool.refilling
      const admitted = this.draw(entry, cost, monotonicMs())
      if (admitted !== undefined) return admitted
      if (outcome !== undefined) {
        if ('error' in outcome) throw outcome.error
        // the store just refused as much: its answer holds for this call too
        if (cost >= outcome.cost) return withCost(outcome.refused, cost)
      }
      pool = this.pools.get(key)
    }
    pool ??= this.create(key)
    let settle!: (outcome: Refilled) => void
    pool.refilling = new Promise((resolve) => {
      settle = resolve
    })
    let outcome: Refilled
    try {
      const { decision, refused } = await this.refill(pool, entry, cost, started, refill)
      outcome = refused
      return decision
    } catch (error) {
      outcome = { error }
      throw error
    } finally {
      pool.refilling = undefined
      settle(outcome)
    }
  }

  /**
   * Gives `units` of a draw back to the key's units while the window they were taken in lasts (after it,
   * or once the key's units were dropped, they lapse). A settled draw gives nothing back.
   */
  refund(token: RefundToken, units: number): void {
    const given = this.returned.get(token) ?? 0
    const back = given === SETTLED ? 0 : Math.min(units, token.cost - given)
    if (back <= 0) return
    this.returned.set(token, given + back)
    const pool = this.pools.get(token.keys[0])
    if (pool !== undefined && pool.tags === token.tags && pool.endsAt > monotonicMs()) pool.left += back
  }

  /**
   * Marks a draw settled, if nothing of it was refunded or settled yet (then the settle goes to the
   * store). `undo` takes the mark back (the store call failed: a retry may still settle).
   */
  settling(token: RefundToken, undo = false): boolean {
    if (undo) return this.returned.delete(token)
    if (this.returned.has(token)) return false
    this.returned.set(token, SETTLED)
    return true
  }

  /** A store peek with this process's units counted as remaining. */
  peeked(decision: Decision, entry: StoreEntry, cost: number): Decision {
    const pool = this.pools.get(entry.key)
    if (pool === undefined || pool.left === 0 || pool.endsAt <= monotonicMs()) return decision
    const remaining = decision.remaining + pool.left
    const allowed = decision.allowed || pool.left >= cost
    const retryAfterMs = allowed ? 0 : decision.retryAfterMs
    const policy = { ...decision.policies[0], allowed, remaining, retryAfterMs }
    return { ...decision, allowed, remaining, retryAfterMs, policies: [policy] }
  }

  /** Forgets the key's units (`reset()`). */
  drop(key: string): void {
    this.pools.delete(key)
  }

  get size(): number {
    return this.pools.size
  }

  /**
   * One refill: a whole reserve, or, once the store refused one in this window, what the call costs.
   * When it refuses a whole reserve but has the call's cost left, what is left is taken instead.
   */
  private async refill(
    pool: Pool,
    entry: StoreEntry,
    cost: number,
    started: number,
    refill: Refill,
  ): Promise<{ decision: Decision; refused: Refilled }> {
    let asked = pool.edge && pool.endsAt > started ? cost : this.units
    let reply = await refill.consume(asked)
    if (!reply.results[0].allowed && asked > cost) {
      this.place(pool, entry, reply, started, 0)
      pool.edge = true
      const left = reply.results[0].remaining
      asked = Math.max(left, cost)
      reply = await refill.consume(asked)
    }
    if (!reply.results[0].allowed) {
      const decision = withCost(refill.refused(reply, asked), cost)
      if (this.denyCache && Number.isFinite(decision.retryAfterMs))
        rememberRefusal(this.denyCache, entry.key, asked, started, decision, false)
      return { decision, refused: { refused: decision, cost: asked } }
    }
    this.place(pool, entry, reply, started, asked)
    pool.left -= cost
    return { decision: drawn(pool, entry, cost, monotonicMs()), refused: undefined }
  }

  /** Adds `units` the store just granted (the units of an older window lapse), with the reply's numbers. */
  private place(pool: Pool, entry: StoreEntry, reply: StoreReply, started: number, units: number): void {
    const r = reply.results[0]
    const windowMs = entry.policy.windowMs
    if (pool.tags[0] !== r.tag || pool.endsAt <= started) {
      pool.tags = [r.tag]
      pool.left = 0
      pool.edge = false
    }
    pool.left += units
    // the window index times its length: the window's end on the store's clock
    pool.endsAt = started + ((r.tag + 1) * windowMs * 1000 - reply.nowUs) / 1000
    pool.remaining = r.remaining
    pool.resetAt = started + r.resetMs
    // most recently refilled last: the bound drops the keys refilled longest ago first
    if (this.pools.get(entry.key) === pool) {
      this.pools.delete(entry.key)
      this.pools.set(entry.key, pool)
    }
  }

  private create(key: string): Pool {
    const pools = this.pools
    if (pools.size >= this.maxKeys) {
      const now = monotonicMs()
      for (const [k, p] of pools) {
        if (pools.size < this.maxKeys && p.endsAt > now) break
        pools.delete(k)
      }
    }
    const pool: Pool = {
      left: 0,
      endsAt: 0,
      tags: NO_TAGS,
      remaining: 0,
      resetAt: 0,
      edge: false,
      refilling: undefined,
      keys: [key],
    }
    pools.set(key, pool)
    return pool
  }
}

const NO_TAGS: readonly number[] = [Number.NaN]

/** A decision about `cost` units when the store answered for another amount. */
function withCost(decision: Decision, cost: number): Decision {
  return decision.cost === cost ? decision : { ...decision, cost }
}

/** The decision of a draw of `cost` from `pool` at `now`. */
function drawn(pool: Pool, entry: StoreEntry, cost: number, now: number): Decision {
  const p = entry.policy
  const remaining = pool.remaining + pool.left
  const resetMs = Math.max(0, Math.ceil(pool.resetAt - now))
  return {
    allowed: true,
    limit: p.burst,
    remaining,
    resetMs,
    retryAfterMs: 0,
    cost,
    policies: [
      {
        policy: p.name,
        key: entry.identity ?? entry.key,
        algorithm: p.algorithm,
        allowed: true,
        limit: p.burst,
        windowMs: p.windowMs,
        remaining,
        resetMs,
        retryAfterMs: 0,
      },
    ],
    binding: 0,
    source: 'reserve',
    refundToken: { keys: pool.keys, tags: pool.tags, cost, seq: nextSpendSeq() },
  }
}
