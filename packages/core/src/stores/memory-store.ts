/**
 * An in-process store with the same decisions as `RedisStore` for the same clock: the algorithms' TS
 * twins. For tests, development, single-process apps and the `local` failure policy. Bounded: no timer
 * per key, expired entries swept lazily, at most `maxKeys` keys and `maxBytes` bytes. When full it stays
 * strict: a live counter is never forgotten to make room (that would admit its identity again); a key it
 * does not hold is refused until a held one expires.
 * @module
 */

import { TWINS } from '../algorithms'
import { calendar } from '../algorithms/calendar'
import type { Check, Twin } from '../algorithms/types'
import { applyControl, MemoryControls } from '../controls'
import { collapse, costAt, isFree } from '../cost'
import { brand, isBranded } from '../errors'
import { penaltyKey, refundMarkerKey } from '../keys'
import { check, checkOptions, type OptionSchema } from '../options'
import { applyBlock, countRefusal, hasPenalty, type PenaltyState } from '../penalty'
import type {
  PairCost,
  ResolvedPolicy,
  SpendOnce,
  Store,
  StoreEntry,
  StoreReply,
  StoreResult,
  TopSets,
} from '../types'
import { MemoryTopSets } from './memory-top-sets'

interface Slot {
  readonly code: number
  state: unknown
  expiresAtMs: number
  /** What this key is charged against `maxBytes` (see {@link slotBytes}). */
  readonly bytes: number
}

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Most keys kept. When full, a call that needs a key not held is refused (`retryAfterMs`: until a held
   * key expires) instead of forgetting a live counter, which would admit that identity again. Keep it
   * above the number of identities active within one window.
   * @default 100000
   */
  maxKeys?: number
  /**
   * Most bytes kept, by an estimate that errs high: per key, a fixed overhead plus the key's length, plus
   * for sliding-log its log. Full works as for `maxKeys` (a log that would grow past it is refused too).
   * @default 67108864 (64 MiB)
   */
  maxBytes?: number
  /**
   * The clock, in integer microseconds since the epoch. Tests pass a controlled clock.
   * @default wall-clock time with microsecond resolution
   */
  clock?: () => number
}

const systemClock = (): number => Math.floor((performance.timeOrigin + performance.now()) * 1000)
const SWEEP_PER_WRITE = 4
/** The code of a refund marker's slot (the algorithms are 1-5). */
const MARKER = 0
/** What a settlement's marker holds: more given back than any spend, so nothing more applies. */
const SETTLED = Number.MAX_SAFE_INTEGER
/** The code of a penalty state's slot (`<key>!p`, see penalty.ts). */
const PENALTY = -1

/** Live keys looked at, at most, when full, to find an expired one (each moves to the back). */
const ROOM_SCAN = 8

// Heap bytes of one key as V8 lays it out, rounded up: the Map entry, the slot, the state
// object and its numbers (SLOT_BYTES); the key string at two bytes a char (a one-byte string takes half);
// a sliding-log array with its worst growth slack (LOG_BYTES + LOG_ENTRY_BYTES per logged unit).
const SLOT_BYTES = 256
const LOG_BYTES = 64
const LOG_ENTRY_BYTES = 12

/** The bytes a key is charged: `logLength` is its sliding-log's length, or -1 for other algorithms. */
function slotBytes(key: string, logLength: number): number {
  return SLOT_BYTES + 2 * key.length + (logLength < 0 ? 0 : LOG_BYTES + LOG_ENTRY_BYTES * logLength)
}

const logLength = (state: unknown): number => (Array.isArray(state) ? state.length : -1)

const MEMORY_STORE_OPTIONS: OptionSchema = {
  maxKeys: check.positiveInt,
  maxBytes: check.positiveInt,
  clock: check.fn,
}

/**
 * @example
 * const limiter = new RateLimiter({ store: new MemoryStore(), limit: 10, window: '1s' })
 */
export class MemoryStore implements Store {
  static {
    brand(MemoryStore, 'MemoryStore')
  }
  /** Recognises a store of either build (ESM, CommonJS) or copy of the package. */
  static [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass instanceof asks about
    return isBranded(this, value)
  }
  readonly maxKeys: number
  readonly maxBytes: number
  private readonly clock: () => number
  private readonly slots = new Map<string, Slot>()
  private used = 0
  readonly topSets: TopSets
  readonly controls: MemoryControls

  constructor(options: MemoryStoreOptions = {}) {
    checkOptions(options, MEMORY_STORE_OPTIONS)
    const { maxKeys = 100_000, maxBytes = 64 * 1024 * 1024, clock = systemClock } = options
    this.maxKeys = maxKeys
    this.maxBytes = maxBytes
    this.clock = clock
    this.topSets = new MemoryTopSets(() => Math.floor(clock() / 1000))
    this.controls = new MemoryControls(() => Math.floor(clock() / 1000))
  }

  /** Number of keys held (expired ones may still count until swept). */
  get size(): number {
    return this.slots.size
  }

  /** Bytes charged against `maxBytes` by the keys held. */
  get bytes(): number {
    return this.used
  }

  consume(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    return Promise.resolve(this.consumeAt(this.clock(), entries, cost))
  }

  peek(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    return Promise.resolve(this.peekAt(this.clock(), entries, cost))
  }

  refund(
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: PairCost,
    once?: SpendOnce,
  ): Promise<number> {
    const nowUs = this.clock()
    this.refundAt(nowUs, entries, tags, cost, once)
    return Promise.resolve(nowUs)
  }

  reset(entries: readonly StoreEntry[]): Promise<void> {
    for (const e of entries) {
      this.forget(e.key)
      if (e.policy.penalty) this.forget(penaltyKey(e.key))
    }
    return Promise.resolve()
  }

  /** `consume` at an explicit time (us): the twin of one consume script run. */
  consumeAt(nowUs: number, given: readonly StoreEntry[], cost: PairCost): StoreReply {
    const over = this.controls.overridden(given, Math.floor(nowUs / 1000))
    const entries = over?.entries ?? given
    const checks = this.checks(nowUs, entries, cost)
    let all = true
    for (const c of checks) if (!c.allowed) all = false
    const penalties = hasPenalty(entries) ? this.penalties(nowUs, entries) : undefined
    if (penalties?.blocked) all = false
    const { ctl, left } = this.controls.state(entries, Math.floor(nowUs / 1000))
    if (ctl !== 0)
      return {
        nowUs,
        results: limited(
          checks.map((c) => applyControl(toResult(c), ctl, left)),
          over,
        ),
      }
    if (all) {
      for (let i = 0; i < entries.length; i++) {
        const c = costAt(cost, i)
        if (c === 0) continue // as the scripts: a pair of cost 0 is not charged
        const e = entries[i]!
        const stored = this.twin(e).commit(checks[i]!, nowUs, e.policy, c)
        this.write(e.key, this.twin(e).code, stored.state, stored.expiresAtMs, nowUs)
      }
    }
    if (penalties) this.settlePenalties(nowUs, entries, checks, penalties.states, true)
    return { nowUs, results: limited(checks.map(toResult), over) }
  }

  /** `peek` at an explicit time (us): refused where `consume` would be, full store included. */
  peekAt(nowUs: number, given: readonly StoreEntry[], cost: PairCost): StoreReply {
    const over = this.controls.overridden(given, Math.floor(nowUs / 1000))
    const entries = over?.entries ?? given
    const checks = this.checks(nowUs, entries, cost)
    const { ctl, left } = this.controls.state(entries, Math.floor(nowUs / 1000))
    if (ctl !== 0)
      return {
        nowUs,
        results: limited(
          checks.map((c) => applyControl(toResult(c), ctl, left)),
          over,
        ),
      }
    if (hasPenalty(entries)) {
      this.settlePenalties(nowUs, entries, checks, this.penalties(nowUs, entries).states, false)
    }
    return { nowUs, results: limited(checks.map(toResult), over) }
  }

  /** The penalty state of each pair that has a penalty (twin of pen_check). */
  private penalties(
    nowUs: number,
    entries: readonly StoreEntry[],
  ): { states: (PenaltyState | undefined)[]; blocked: boolean } {
    const nowMs = Math.floor(nowUs / 1000)
    const states: (PenaltyState | undefined)[] = new Array(entries.length)
    let blocked = false
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!
      if (!e.policy.penalty) continue
      const key = penaltyKey(e.key)
      const slot = this.slots.get(key)
      if (!slot || slot.code !== PENALTY || slot.expiresAtMs < nowMs) continue
      const state = slot.state as PenaltyState
      states[i] = state
      if (state.until > nowMs) blocked = true
    }
    return { states, blocked }
  }

  /** A blocked pair reports its block; a consume counts a pair's own refusal (twin of pen_settle). */
  private settlePenalties(
    nowUs: number,
    entries: readonly StoreEntry[],
    checks: Check<unknown>[],
    states: readonly (PenaltyState | undefined)[],
    spend: boolean,
  ): void {
    const nowMs = Math.floor(nowUs / 1000)
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!
      const penalty = e.policy.penalty
      if (!penalty) continue
      const state = states[i]
      const c = checks[i]!
      if (state && state.until > nowMs) applyBlock(c, state.until - nowMs)
      else if (spend && !c.allowed && c.retryMs !== -1) {
        const next = countRefusal(state, nowMs, penalty)
        this.write(penaltyKey(e.key), PENALTY, next.state, next.expiresAtMs, nowUs)
        if (next.state.until > nowMs) applyBlock(c, next.state.until - nowMs)
      }
    }
  }

  /** `refund` at an explicit time (us). */
  refundAt(
    nowUs: number,
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: PairCost,
    once?: SpendOnce,
  ): void {
    if (once && entries.length > 0) {
      // The twin of refund.lua's marker: units given back under this id (one number for every pair, or
      // one per pair), kept while a refund can matter (horizon.lua).
      const marker = refundMarkerKey(entries[0]!.key, once.id)
      const nowMs = Math.floor(nowUs / 1000)
      const slot = this.slots.get(marker)
      const held = slot !== undefined && slot.code === MARKER && slot.expiresAtMs >= nowMs
      if (once.settle && held) return // refunded or settled already: no more
      const before = held ? (slot.state as PairCost) : 0
      const costs = new Array<number>(entries.length)
      const done = new Array<number>(entries.length)
      let any = false
      for (let i = 0; i < entries.length; i++) {
        const spent = costAt(once.spent, i)
        if (once.settle) {
          costs[i] = costAt(cost, i)
          done[i] = SETTLED
        } else {
          const d = costAt(before, i)
          costs[i] = Math.max(0, Math.min(costAt(cost, i), spent - d))
          done[i] = d + costs[i]!
        }
        if (costs[i] !== 0) any = true
      }
      if (!any && !once.settle) return
      cost = collapse(costs)
      let last = 0
      for (let i = 0; i < entries.length; i++)
        last = Math.max(last, spendHorizonMs(entries[i]!.policy, tags[i]!))
      // past the last pair's horizon a later refund changes nothing either: no marker needed
      if (last > nowMs) this.write(marker, MARKER, collapse(done), last, nowUs)
    }
    entries.forEach((e, i) => {
      const c = costAt(cost, i)
      if (c === 0) return
      const twin = this.twin(e)
      const next = twin.refund(this.read(e, nowUs), nowUs, e.policy, tags[i]!, c)
      if (next) this.write(e.key, this.twin(e).code, next.state, next.expiresAtMs, nowUs)
      else this.forget(e.key)
    })
  }

  /**
   * Each entry's check. When what the call would add (new keys, a longer log) does not fit, those entries
   * are refused until a held key expires: forgetting a live counter instead would hand its identity a
   * fresh quota, which an attacker could force with a flood of new identities.
   */
  private checks(nowUs: number, entries: readonly StoreEntry[], cost: PairCost): Check<unknown>[] {
    const checks: Check<unknown>[] = new Array(entries.length)
    // What a spend would add: new keys, and bytes (a sliding-log grows by `cost` entries at most).
    const grows: boolean[] = new Array(entries.length)
    let newKeys = 0
    let growth = 0
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!
      const pc = costAt(cost, i)
      const c = this.twin(e).check(this.read(e, nowUs), nowUs, e.policy, pc)
      checks[i] = c
      grows[i] = false
      if (pc === 0) continue // not charged: nothing written
      const held = this.slots.get(e.key)
      const log = Array.isArray(c.base) ? logLength(c.base) + pc : -1 // sliding-log, concurrency
      const more = slotBytes(e.key, log) - (held?.bytes ?? 0)
      grows[i] = !held || more > 0
      if (!held) newKeys++
      if (more > 0) growth += more
    }
    if (isFree(cost) || (newKeys === 0 && growth === 0)) return checks
    const waitMs = this.room(newKeys, growth, Math.floor(nowUs / 1000))
    if (waitMs === 0) return checks
    for (let i = 0; i < entries.length; i++) {
      const c = checks[i]!
      if (c.allowed && grows[i]) {
        checks[i] = {
          ...c,
          allowed: false,
          remaining: 0,
          resetMs: Math.max(0, waitMs),
          retryMs: waitMs,
        }
      }
    }
    return checks
  }

  /**
   * Frees expired keys until `keys` more keys of `bytes` fit. Returns 0 when they fit, else the ms until
   * the soonest-expiring key looked at goes (-1: they can never fit). Looks at up to ROOM_SCAN live keys
   * from the least recently written, moving each to the back so the next call looks at others.
   */
  private room(keys: number, bytes: number, nowMs: number): number {
    if (keys > this.maxKeys || bytes > this.maxBytes) return -1
    let soonest = Number.POSITIVE_INFINITY
    let scanned = 0
    while (this.slots.size + keys > this.maxKeys || this.used + bytes > this.maxBytes) {
      const head = this.slots.entries().next().value
      if (head === undefined) return -1
      const [key, slot] = head
      // Redis keeps a key through the millisecond it expires at.
      if (slot.expiresAtMs < nowMs) {
        this.forget(key)
        continue
      }
      soonest = Math.min(soonest, slot.expiresAtMs)
      if (++scanned > ROOM_SCAN) return soonest + 1 - nowMs
      this.slots.delete(key)
      this.slots.set(key, slot)
    }
    return 0
  }

  private twin(e: StoreEntry): Twin<unknown> {
    return e.policy.calendar ? calendar : TWINS[e.policy.algorithm]
  }

  private read(e: StoreEntry, nowUs: number): unknown {
    const slot = this.slots.get(e.key)
    if (!slot) return undefined
    // Redis keeps a key through the millisecond it expires at; the algorithms guard that edge themselves.
    if (slot.expiresAtMs < Math.floor(nowUs / 1000)) {
      this.forget(e.key)
      return undefined
    }
    // A key written by another algorithm is read as empty (the scripts repair a wrong-typed key the same way).
    return slot.code === this.twin(e).code ? slot.state : undefined
  }

  private write(key: string, code: number, state: unknown, expiresAtMs: number, nowUs: number): void {
    // Re-insert so that Map order is least-recently-written first (about soonest-expiring first).
    this.forget(key)
    const bytes = slotBytes(key, logLength(state))
    this.slots.set(key, { code, state, expiresAtMs, bytes })
    this.used += bytes
    this.sweep(Math.floor(nowUs / 1000))
  }

  private forget(key: string): void {
    const slot = this.slots.get(key)
    if (!slot) return
    this.slots.delete(key)
    this.used -= slot.bytes
  }

  /** Drops expired keys among the least recently written (never a live one). */
  private sweep(nowMs: number): void {
    let n = 0
    for (const [key, slot] of this.slots) {
      if (n++ >= SWEEP_PER_WRITE) break
      if (slot.expiresAtMs < nowMs) this.forget(key)
    }
  }
}

/** Results with the limit each overridden pair was decided under (what the scripts reply). */
function limited(
  results: StoreResult[],
  over: { limits: (number | undefined)[] } | undefined,
): StoreResult[] {
  if (over === undefined) return results
  return results.map((r, i) => (over.limits[i] === undefined ? r : withLimit(r, over.limits[i]!)))
}

/** `{ ...r, limit }` built by Object.assign: a spread plus a new name makes V8 build a fresh hidden class. */
function withLimit(r: StoreResult, limit: number): StoreResult {
  const out: { -readonly [K in keyof StoreResult]: StoreResult[K] } = Object.assign({}, r)
  out.limit = limit
  return out
}

function toResult(c: Check<unknown>): StoreResult {
  return {
    allowed: c.allowed,
    remaining: c.remaining,
    resetMs: c.resetMs,
    retryAfterMs: c.retryMs,
    tag: c.tag,
  }
}

/**
 * The twin of horizon.lua: until when (epoch ms) a refund or settlement of a spend tagged `tag` can still
 * change its pair, so its marker lasts no longer.
 */
export function spendHorizonMs(p: ResolvedPolicy, tag: number): number {
  if (p.calendar) return tag // the spend's period's end
  switch (p.algorithm) {
    case 'fixed-window':
      return (tag + 1) * p.windowMs
    case 'sliding-window':
      return (tag + 2) * p.windowMs
    case 'sliding-log':
    case 'concurrency':
      return Math.ceil(tag / 1000) + p.windowMs
    default:
      return Math.ceil((tag + 2 * p.burst * Math.ceil((p.windowMs * 1000) / p.limit)) / 1000)
  }
}
