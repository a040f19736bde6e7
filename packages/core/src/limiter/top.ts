/**
 * Who is being refused: a stage that tallies, per policy, the identities the limiter refused, and adds the
 * tally to the store's top sets (a capped sorted set per policy and period) about once a second; and
 * `RateLimiter.top`, which reads them back. Admitted calls cost nothing here.
 * @module
 */
import { InputError } from '../errors'
import { identityTag, topKey } from '../keys'
import type { Decision, ResolvedPolicy, TopSets } from '../types'
import type { Call, Stage } from './stage'

/** One identity a policy refused, and how often, in its current and previous period. */
export interface TopEntry {
  identity: string
  policy: string
  refused: number
}

/**
 * A top set's period: the policy's window, so a set lives no longer than the state it describes (two
 * windows), but at least the flush interval.
 */
const MIN_PERIOD_MS = 1000
/** How long refusals wait in process before they are added to the store. */
const FLUSH_MS = 1000
/** Identities tallied in process before an early flush (a flood of fresh identities). */
const MAX_PENDING = 10_000
/** Identities longer than this are kept as their key's hashed tag, so a set's members stay small. */
const MAX_IDENTITY_CHARS = 128

export class TopTally implements Stage {
  private pending = new Map<string, Map<string, number>>()
  private size = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  /** The add under way: at most one, so a store that does not answer holds one tally, not one a second. */
  private flushing: Promise<void> | undefined
  private readonly periods: ReadonlyMap<string, number>

  constructor(
    private readonly sets: TopSets,
    private readonly prefix: string,
    policies: readonly ResolvedPolicy[],
    /** The most members a top set keeps. */
    readonly cap: number,
  ) {
    this.periods = new Map(policies.map((p) => [p.name, Math.max(p.windowMs, MIN_PERIOD_MS)]))
  }

  refused(_call: Call, decision: Decision): void {
    const policies = decision.policies
    for (let i = 0; i < policies.length; i++) {
      const p = policies[i]!
      if (p.allowed) continue
      let counts = this.pending.get(p.policy)
      if (counts === undefined) {
        counts = new Map()
        this.pending.set(p.policy, counts)
      }
      const identity = p.key.length <= MAX_IDENTITY_CHARS ? p.key : identityTag(p.key)
      const n = counts.get(identity)
      if (n === undefined) {
        // full while an add is still out (a slow or frozen store): new identities wait for the next window
        if (this.size >= MAX_PENDING) continue
        this.size++
      }
      counts.set(identity, (n ?? 0) + 1)
    }
    if (this.size >= MAX_PENDING) this.flush()
    else this.schedule()
  }

  /**
   * Adds what was tallied to the store, one add at a time: while one is out, the tally keeps counting
   * (bounded) and goes once it is answered. Resolves when the add under way (if any) is answered.
   */
  flush(): Promise<void> {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    if (this.flushing !== undefined || this.size === 0) return this.flushing ?? Promise.resolve()
    const pending = this.pending
    this.pending = new Map()
    this.size = 0
    const now = Date.now()
    const adds: Promise<void>[] = []
    for (const [policy, counts] of pending) {
      const period = this.periods.get(policy)!
      const index = Math.floor(now / period)
      const key = topKey(this.prefix, policy, period, index)
      // lost while the store is down: counting refusals must never fail a call
      adds.push(this.sets.add(key, this.cap, (index + 2) * period, counts).catch(() => undefined))
    }
    const flushing = Promise.all(adds).then(() => {
      this.flushing = undefined
      this.schedule()
    })
    this.flushing = flushing
    return flushing
  }

  /** One timer for what is tallied, none while an add is out (its answer schedules the next). */
  private schedule(): void {
    if (this.timer !== undefined || this.flushing !== undefined || this.size === 0) return
    this.timer = setTimeout(() => this.flush(), FLUSH_MS)
    // a tally never keeps a process alive
    ;(this.timer as { unref?: () => void }).unref?.()
  }

  /** The most refused identities of every policy (or of `policy`), most first, in their last two periods. */
  async top(options: { limit?: number; policy?: string } | undefined): Promise<TopEntry[]> {
    if (options !== undefined && (typeof options !== 'object' || options === null))
      throw new InputError('options', 'an object like { limit: 10 }', options)
    const { limit = 10, policy } = options ?? {}
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > this.cap)
      throw new InputError('limit', `an integer from 1 to ${this.cap}`, limit)
    if (policy !== undefined && !this.periods.has(policy))
      throw new InputError(
        'policy',
        `one of this limiter's policies (${[...this.periods.keys()].join(', ')})`,
        policy,
      )
    // what the add under way left behind goes next
    await this.flush()
    await this.flush()
    const now = Date.now()
    const out: TopEntry[] = []
    for (const [name, period] of this.periods) {
      if (policy !== undefined && name !== policy) continue
      const index = Math.floor(now / period)
      const keys = [topKey(this.prefix, name, period, index), topKey(this.prefix, name, period, index - 1)]
      const summed = new Map<string, number>()
      for (const set of await this.sets.read(keys))
        for (const [identity, n] of set) summed.set(identity, (summed.get(identity) ?? 0) + n)
      for (const [identity, refused] of summed) out.push({ identity, policy: name, refused })
    }
    out.sort(
      (a, b) => b.refused - a.refused || (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0),
    )
    return out.slice(0, limit)
  }
}
