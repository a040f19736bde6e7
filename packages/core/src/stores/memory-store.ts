/**
 * An in-process store with the same decisions as `RedisStore` for the same clock: the algorithms' TS
 * twins. For tests, development, single-process apps and the `local` failure policy. Bounded: no timer
 * per key, expired entries swept lazily, and at most `maxKeys` entries (the least recently written go first).
 * @module
 */
import { TWINS } from '../algorithms'
import type { Check, Twin } from '../algorithms/types'
import { ConfigError } from '../errors'
import { refundMarkerKey } from '../keys'
import type { SpendOnce, Store, StoreEntry, StoreReply, StoreResult } from '../types'

interface Slot {
  readonly code: number
  state: unknown
  expiresAtMs: number
}

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /**
   * Most keys kept. Past it the least recently written key is forgotten (which forgets its usage,
   * so keep it well above the number of active identities).
   * @default 100000
   */
  maxKeys?: number
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

/**
 * @example
 * const limiter = new RateLimiter({ store: new MemoryStore(), limit: 10, window: '1s' })
 */
export class MemoryStore implements Store {
  readonly maxKeys: number
  private readonly clock: () => number
  private readonly slots = new Map<string, Slot>()

  constructor(options: MemoryStoreOptions = {}) {
    const { maxKeys = 100_000, clock = systemClock, ...rest } = options
    const unknown = Object.keys(rest)[0]
    if (unknown)
      throw new ConfigError(`MemoryStore.${unknown}`, 'a known option (maxKeys, clock)', unknown, 'type')
    if (!Number.isSafeInteger(maxKeys) || maxKeys <= 0) {
      throw new ConfigError('maxKeys', 'a positive integer', maxKeys)
    }
    if (typeof clock !== 'function')
      throw new ConfigError('clock', 'a function returning microseconds', clock, 'type')
    this.maxKeys = maxKeys
    this.clock = clock
  }

  /** Number of keys held (expired ones may still count until swept). */
  get size(): number {
    return this.slots.size
  }

  consume(entries: readonly StoreEntry[], cost: number): Promise<StoreReply> {
    return Promise.resolve(this.consumeAt(this.clock(), entries, cost))
  }

  peek(entries: readonly StoreEntry[], cost: number): Promise<StoreReply> {
    return Promise.resolve(this.peekAt(this.clock(), entries, cost))
  }

  refund(
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: number,
    once?: SpendOnce,
  ): Promise<number> {
    const nowUs = this.clock()
    this.refundAt(nowUs, entries, tags, cost, once)
    return Promise.resolve(nowUs)
  }

  reset(entries: readonly StoreEntry[]): Promise<void> {
    for (const e of entries) this.slots.delete(e.key)
    return Promise.resolve()
  }

  /** `consume` at an explicit time (us): the twin of one consume script run. */
  consumeAt(nowUs: number, entries: readonly StoreEntry[], cost: number): StoreReply {
    const checks: Check<unknown>[] = []
    let all = true
    for (const e of entries) {
      const c = this.twin(e).check(this.read(e, nowUs), nowUs, e.policy, cost)
      if (!c.allowed) all = false
      checks.push(c)
    }
    if (all && cost > 0) {
      for (let i = 0; i < entries.length; i++) {
        const e = entries[i]
        const stored = this.twin(e).commit(checks[i], nowUs, e.policy, cost)
        this.write(e.key, this.twin(e).code, stored.state, stored.expiresAtMs, nowUs)
      }
    }
    return { nowUs, results: checks.map(toResult) }
  }

  /** `peek` at an explicit time (us). */
  peekAt(nowUs: number, entries: readonly StoreEntry[], cost: number): StoreReply {
    return {
      nowUs,
      results: entries.map((e) => toResult(this.twin(e).check(this.read(e, nowUs), nowUs, e.policy, cost))),
    }
  }

  /** `refund` at an explicit time (us). */
  refundAt(
    nowUs: number,
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: number,
    once?: SpendOnce,
  ): void {
    if (once && entries.length > 0) {
      // The twin of refund.lua's marker: units given back under this id, kept while a refund can matter.
      const marker = refundMarkerKey(entries[0].key, once.id)
      const nowMs = Math.floor(nowUs / 1000)
      const slot = this.slots.get(marker)
      const done = slot && slot.code === MARKER && slot.expiresAtMs >= nowMs ? (slot.state as number) : 0
      cost = Math.min(cost, once.spent - done)
      if (cost <= 0) return
      let ttl = 1
      for (const { policy: p } of entries) {
        ttl = Math.max(
          ttl,
          2 * p.windowMs + Math.ceil((p.burst * Math.ceil((p.windowMs * 1000) / p.limit)) / 1000) + 1,
        )
      }
      this.write(marker, MARKER, done + cost, nowMs + ttl, nowUs)
    }
    entries.forEach((e, i) => {
      const twin = this.twin(e)
      const next = twin.refund(this.read(e, nowUs), nowUs, e.policy, tags[i], cost)
      if (next) this.write(e.key, twin.code, next.state, next.expiresAtMs, nowUs)
      else this.slots.delete(e.key)
    })
  }

  private twin(e: StoreEntry): Twin<unknown> {
    return TWINS[e.policy.algorithm]
  }

  private read(e: StoreEntry, nowUs: number): unknown {
    const slot = this.slots.get(e.key)
    if (!slot) return undefined
    // Redis keeps a key through the millisecond it expires at; the algorithms guard that edge themselves.
    if (slot.expiresAtMs < Math.floor(nowUs / 1000)) {
      this.slots.delete(e.key)
      return undefined
    }
    // A key written by another algorithm is read as empty (the scripts repair a wrong-typed key the same way).
    return slot.code === this.twin(e).code ? slot.state : undefined
  }

  private write(key: string, code: number, state: unknown, expiresAtMs: number, nowUs: number): void {
    // Re-insert so that Map order is least-recently-written first.
    this.slots.delete(key)
    this.slots.set(key, { code, state, expiresAtMs })
    this.sweep(Math.floor(nowUs / 1000))
  }

  private sweep(nowMs: number): void {
    let n = 0
    for (const [key, slot] of this.slots) {
      if (n++ >= SWEEP_PER_WRITE && this.slots.size <= this.maxKeys) break
      if (slot.expiresAtMs < nowMs || this.slots.size > this.maxKeys) this.slots.delete(key)
    }
  }
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
