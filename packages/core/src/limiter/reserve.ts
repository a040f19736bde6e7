/**
 * `reserve`: units a process takes from the store at a time for a key, so that the key's next calls are
 * admitted without a round trip. Taken by an ordinary consume (the store counts them all at once, so
 * every process together stays within the limit) and lapsing with the window they were taken in (the
 * fixed and sliding windows count a unit in the window it was taken in only). With several policies,
 * each has its own units, and one refill takes those of every policy short of them, atomically.
 * See docs/reserve.md.
 * @module
 */
import { collapse, costAt, maxCost } from '../cost'
import { monotonicMs } from '../deadlines'
import type { CallOptions, Decision, PairCost, RefundToken, StoreEntry, StoreReply } from '../types'
import { bindingOf } from './decision'
import { type DenyCache, rememberRefusal } from './deny-cache'
import {
  allAllowed,
  atLeastCost,
  drawn,
  type Pool,
  type Refilled,
  signatureOfKeys,
  wakeNext,
  withCost,
} from './reserve-pool'

/** A refill's store calls, for the call's entries (the limiter's deadline, breaker and events). */
export interface Refill {
  consume(cost: PairCost): Promise<StoreReply>
  /** The store's refusal as the decision to answer with. */
  refused(reply: StoreReply, cost: PairCost): Decision
}

/**
 * Whether a refill can go out before its callers draw (handOn): it needs the check phase to wake them in
 * after the client's write (edge runtimes have no setImmediate).
 */
const AHEAD = typeof setImmediate === 'function'
/**
 * No refill goes ahead this close to the end of the units' window: one that lands after it would lapse
 * unused besides the units on hand.
 */
const AHEAD_MARGIN_MS = 50

/** A limiter's reserves, one pool per key signature, bounded like the deny cache (no timers). */
export class Reserves {
  private readonly pools = new Map<string, Pool>()
  /** Per draw, this process's decision: units its refunds gave back (its draws' `remaining` counts them). */
  private readonly returned = new WeakMap<RefundToken, number[]>()

  constructor(
    /** Each policy's `reserve`: units taken per refill, in declaration order. */
    readonly units: readonly number[],
    readonly maxKeys: number,
    private readonly denyCache: DenyCache<Decision> | undefined,
  ) {}

  /** Whether a call goes through the reserve: costs its units can hold, under the policies' own limits. */
  covers(cost: PairCost, options: CallOptions | undefined): boolean {
    if (options !== undefined && (options.limits !== undefined || options.shadow === true)) return false
    if (typeof cost === 'number') {
      if (cost < 1) return false
      for (const n of this.units) if (cost > n) return false
      return true
    }
    for (let i = 0; i < cost.length; i++) if (cost[i]! > this.units[i]!) return false
    return maxCost(cost) > 0
  }

  /**
   * `cost` admitted from the key's units, or undefined when they cannot cover it, or while they wait for
   * the callers queued for them to be woken (`queued`: a caller woken from that line).
   */
  draw(
    entries: readonly StoreEntry[],
    signature: string,
    cost: PairCost,
    now: number,
    queued = false,
  ): Decision | undefined {
    const pool = this.pools.get(signature)
    if (pool === undefined || (pool.waking && !queued)) return undefined
    if (cost !== 1) pool.unit = false
    const { left, endsAt } = pool
    for (let i = 0; i < left.length; i++) {
      const c = costAt(cost, i)
      if (c === 0) continue
      if (left[i]! < c) return undefined
      if (endsAt[i]! <= now) {
        left[i] = 0
        return undefined
      }
    }
    for (let i = 0; i < left.length; i++) left[i]! -= costAt(cost, i)
    return drawn(pool, entries, cost, now)
  }

  /**
   * Takes units from the store for the call (or awaits the key's refill in flight and draws from it),
   * then draws `cost`. Resolves to the admitted draw or the store's refusal; rejects with the store's error.
   */
  async take(
    entries: readonly StoreEntry[],
    signature: string,
    cost: PairCost,
    started: number,
    refill: Refill,
  ): Promise<Decision> {
    let pool = this.pools.get(signature)
    let first = false // woken, then found another caller's refill begun: first in line for it
    while (pool?.refilling) {
      const queued = pool
      const outcome = await new Promise<Refilled>((wake) => {
        if (first) queued.waiting.unshift(wake)
        else queued.waiting.push(wake)
      })
      // this caller's turn: it wakes the next when it is served, or refills for the rest
      const admitted = this.draw(entries, signature, cost, monotonicMs(), true)
      if (admitted !== undefined) return wakeNext(queued, outcome, admitted)
      if (outcome !== undefined) {
        if ('error' in outcome) {
          wakeNext(queued, outcome, undefined)
          throw outcome.error
        }
        // the store just refused as much: its answer holds for this call too
        if (atLeastCost(cost, outcome.cost)) return wakeNext(queued, outcome, withCost(outcome.refused, cost))
      }
      pool = this.pools.get(signature)
      first = pool === queued
      if (!first) wakeNext(queued, outcome, undefined) // dropped or replaced: its queue moves on
    }
    pool ??= this.create(signature, entries)
    if (cost !== 1) pool.unit = false
    pool.refilling = true
    let taken: { decision: Decision; refused: Refilled }
    try {
      taken = await this.refill(pool, entries, cost, started, refill)
    } catch (error) {
      this.handOn(pool, entries, refill, { error }, false)
      throw error
    }
    this.handOn(pool, entries, refill, taken.refused, taken.refused === undefined)
    return taken.decision
  }

  /**
   * After a refill (`granted`: its units came): wakes the callers waiting. When they outnumber the units
   * (every call of cost 1), the next refill is sent first and they are woken after the client has written
   * it, so it travels while they draw. It arrives only after the draws the units on hand cover: the
   * process still holds at most one reserve per policy.
   */
  private handOn(
    pool: Pool,
    entries: readonly StoreEntry[],
    refill: Refill,
    outcome: Refilled,
    granted: boolean,
  ): void {
    const served = AHEAD && granted && pool.unit ? this.aheadOf(pool) : -1
    if (served >= 0) {
      // nothing in it is expected to throw; if it does, the callers waiting get the error, not a hang
      this.ahead(pool, entries, refill, served).catch((error: unknown) => {
        pool.refilling = false
        pool.waking = false
        wakeNext(pool, { error }, undefined)
      })
      return
    }
    pool.refilling = false
    wakeNext(pool, outcome, undefined)
  }

  /**
   * How many of the callers waiting the units on hand serve (each draws 1 of every policy's), when more
   * are waiting and a refill may go ahead of them; else -1. Not at the edge of a limit, and not close to
   * the end of a window.
   */
  private aheadOf(pool: Pool): number {
    if (this.pools.get(pool.signature) !== pool) return -1
    const { left, endsAt, edge } = pool
    const now = monotonicMs()
    let served = left[0]!
    for (let i = 0; i < left.length; i++) {
      if (edge[i] || endsAt[i]! - now <= AHEAD_MARGIN_MS) return -1
      if (left[i]! < served) served = left[i]!
    }
    return pool.waiting.length > served ? served : -1
  }

  /**
   * The refill for the callers waiting on `pool`, asked for before they are served (handOn): for each
   * policy the `served` draws leave short of the rest, its reserve less what they leave of its units.
   */
  private async ahead(
    pool: Pool,
    entries: readonly StoreEntry[],
    refill: Refill,
    served: number,
  ): Promise<void> {
    const started = monotonicMs()
    const n = pool.left.length
    const units = new Array<number>(n)
    // a policy whose units outlast the callers waiting takes none, as in any refill
    const rest = pool.waiting.length - served
    for (let i = 0; i < n; i++) {
      const after = pool.left[i]! - served
      units[i] = after < rest ? Math.max(0, this.units[i]! - after) : 0
    }
    // sent first: a TCP client writes it before the callers below are woken (node-redis in setImmediate)
    const asked = refill.consume(collapse(units))
    let woken = false
    // until then the units on hand are the waiting callers': a call that comes meanwhile queues
    pool.waking = true
    setImmediate(() => {
      woken = true
      pool.waking = false
      wakeNext(pool, undefined, undefined)
    })
    let reply: StoreReply | undefined
    let outcome: Refilled
    try {
      reply = await asked
    } catch (error) {
      outcome = { error }
    }
    // answered before the callers drew (a store in this process): they draw the units on hand first
    if (!woken) await new Promise((resolve) => setImmediate(resolve))
    // refused: nothing taken; the callers refill themselves, as at the edge of the limit
    const granted = reply !== undefined && allAllowed(reply)
    if (granted) {
      for (let i = 0; i < n; i++) this.place(pool, entries, reply!, started, i, units[i]!)
      this.touch(pool)
    }
    this.handOn(pool, entries, refill, outcome, granted)
  }

  /**
   * After a draw's refund was applied in the store: the units count as remaining again in the key's next
   * draws, within the draw's cost. Only for the decision this process made, in the window its units are
   * from: a copy (JSON) has tags of its own, so it never counts them twice.
   */
  refunded(token: RefundToken, units: PairCost): void {
    const pool = this.pools.get(signatureOfKeys(token.keys))
    if (pool === undefined || pool.tags !== token.tags) return
    const given = this.returned.get(token) ?? new Array<number>(token.keys.length).fill(0)
    this.returned.set(token, given)
    for (let i = 0; i < given.length; i++) {
      const back = Math.min(costAt(units, i), (token.costs?.[i] ?? token.cost) - given[i]!)
      if (back <= 0) continue
      given[i]! += back
      pool.remaining[i]! += back
    }
  }

  /** A store peek with this process's units counted as remaining. */
  peeked(decision: Decision, signature: string, cost: PairCost): Decision {
    const pool = this.pools.get(signature)
    if (pool === undefined) return decision
    const now = monotonicMs()
    let allowed = true
    const policies = decision.policies.map((p, i) => {
      const left = pool.endsAt[i]! > now ? pool.left[i]! : 0
      const own = p.allowed || left >= costAt(cost, i)
      if (!own) allowed = false
      return left === 0 && own === p.allowed
        ? p
        : { ...p, allowed: own, remaining: p.remaining + left, retryAfterMs: own ? 0 : p.retryAfterMs }
    })
    const binding = bindingOf(policies, allowed, undefined)
    const b = policies[binding]!
    const retryAfterMs = allowed ? 0 : b.retryAfterMs
    return {
      ...decision,
      allowed,
      binding,
      policies,
      remaining: b.remaining,
      resetMs: b.resetMs,
      retryAfterMs,
    }
  }

  /** Forgets the key's units (`reset()`). */
  drop(signature: string): void {
    this.pools.delete(signature)
  }

  /**
   * One refill: a whole reserve for every pair short of units, or, once the store refused a pair's whole
   * reserve in this window, what the call costs it. When the store refuses a pair's whole reserve but
   * has the call's cost left, what is left is taken instead, in a second call.
   */
  private async refill(
    pool: Pool,
    entries: readonly StoreEntry[],
    cost: PairCost,
    started: number,
    refill: Refill,
  ): Promise<{ decision: Decision; refused: Refilled }> {
    const n = entries.length
    const asked = new Array<number>(n)
    for (let i = 0; i < n; i++) {
      const c = costAt(cost, i)
      const alive = pool.endsAt[i]! > started
      if (c === 0 || (alive && pool.left[i]! >= c)) asked[i] = 0
      else asked[i] = pool.edge[i] && alive ? c : this.units[i]!
    }
    let reply = await refill.consume(collapse(asked))
    if (!allAllowed(reply)) {
      let retry = false
      for (let i = 0; i < n; i++) {
        const r = reply.results[i]!
        const c = costAt(cost, i)
        if (r.allowed || asked[i]! <= c) continue
        this.place(pool, entries, reply, started, i, 0)
        pool.edge[i] = true
        asked[i] = Math.max(r.remaining, c)
        retry = true
      }
      if (retry) reply = await refill.consume(collapse(asked))
    }
    if (!allAllowed(reply)) {
      const spent = collapse(asked)
      const decision = withCost(refill.refused(reply, spent), cost)
      if (this.denyCache && Number.isFinite(decision.retryAfterMs))
        rememberRefusal(this.denyCache, pool.signature, spent, started, decision, false)
      return { decision, refused: { refused: decision, cost: spent } }
    }
    for (let i = 0; i < n; i++) {
      this.place(pool, entries, reply, started, i, asked[i]!)
      // a pair whose window the store ended before this process did: never drawn below zero
      pool.left[i] = Math.max(0, pool.left[i]! - costAt(cost, i))
    }
    this.touch(pool)
    return { decision: drawn(pool, entries, cost, monotonicMs()), refused: undefined }
  }

  /** Adds `units` the store just granted pair `i` (units of an older window lapse), with its numbers. */
  private place(
    pool: Pool,
    entries: readonly StoreEntry[],
    reply: StoreReply,
    started: number,
    i: number,
    units: number,
  ): void {
    const r = reply.results[i]!
    if (pool.tags[i] !== r.tag || pool.endsAt[i]! <= started) {
      const tags = pool.tags.slice()
      tags[i] = r.tag
      pool.tags = tags
      pool.left[i] = 0
      pool.edge[i] = false
    }
    pool.left[i]! += units
    // the window index times its length: the window's end on the store's clock
    const windowMs = entries[i]!.policy.windowMs
    pool.endsAt[i] = started + ((r.tag + 1) * windowMs * 1000 - reply.nowUs) / 1000
    pool.remaining[i] = r.remaining
    pool.resetAt[i] = started + r.resetMs
  }

  /** Most recently refilled last: the bound drops the keys refilled longest ago first. */
  private touch(pool: Pool): void {
    if (this.pools.get(pool.signature) !== pool) return
    this.pools.delete(pool.signature)
    this.pools.set(pool.signature, pool)
  }

  private create(signature: string, entries: readonly StoreEntry[]): Pool {
    const pools = this.pools
    if (pools.size >= this.maxKeys) {
      const now = monotonicMs()
      for (const [key, p] of pools) {
        // past the bound, the oldest goes; then the lapsed ones (a pool whose refill is in flight has not)
        if (pools.size < this.maxKeys && (p.refilling || p.endsAt.every((end) => end > now))) break
        pools.delete(key)
      }
    }
    const n = entries.length
    const pool: Pool = {
      left: new Array(n).fill(0),
      endsAt: new Array(n).fill(0),
      tags: new Array(n).fill(Number.NaN),
      remaining: new Array(n).fill(0),
      resetAt: new Array(n).fill(0),
      edge: new Array(n).fill(false),
      refilling: false,
      waking: false,
      unit: true,
      waiting: [],
      signature,
      keys: entries.map((e) => e.key),
    }
    pools.set(signature, pool)
    return pool
  }
}
