/**
 * Block and allow entries: what `RateLimiter.block` and `allow` accept, the tags the decision scripts
 * answer with (lua/includes/control.lua), and the in-memory twin of those entries for MemoryStore.
 * @module
 */

import { withAnchor } from './calendar'
import { parseDuration } from './duration'
import { ConfigError, InputError } from './errors'
import { controlKeyOf } from './keys'
import { withLimit } from './limits'
import { keyPolicyName, type ParsedOverride, parseSpec } from './overrides'
import { prefixOfKey } from './patterns'
import type { ControlEntry, Controls, ResolvedPolicy, StoreEntry, StoreResult } from './types'

/** A pair's tag when a block refused its call (control.lua's ctl_block; real tags are >= 0). */
export const CONTROL_BLOCK_TAG = -2
/** A pair's tag when allow entries admitted its call without spending (ctl_allow). */
export const CONTROL_ALLOW_TAG = -3

/** The longest block or allow entry: a year, as the longest window. */
export const MAX_CONTROL_MS = 365 * 86_400_000
/** The longest block reason, in UTF-16 code units. */
export const MAX_REASON_CHARS = 200
/** The most blocks `blocks()` lists by default, and at most. */
export const MAX_LISTED = 1000

/** Options of `RateLimiter.block`. */
export interface BlockOptions {
  /** How long the block lasts (required, at most 365 days), from the store's clock. */
  for: number | string
  /** Why, for operators (`blocks()`, the CLI): at most 200 characters. @default '' */
  reason?: string
}

/** Options of `RateLimiter.allow`. */
export interface AllowOptions {
  /** How long the allow entry lasts (required, at most 365 days), from the store's clock. */
  for: number | string
}

/** One live block, as `RateLimiter.blocks()` lists it. */
export type BlockEntry = ControlEntry

/** A block's or allow entry's checked `for` (ms) and reason: an `InputError` before any store command. */
export function checkControl(options: unknown, method: 'block' | 'allow'): { forMs: number; reason: string } {
  if (typeof options !== 'object' || options === null) {
    throw new InputError(`${method} options`, "an object like { for: '1h' }", options)
  }
  const { for: span, reason = '', ...rest } = options as Partial<BlockOptions>
  const unknown = Object.keys(rest)[0] ?? (method === 'allow' && 'reason' in options ? 'reason' : undefined)
  if (unknown !== undefined) throw new InputError(`${method} options`, 'only for and reason', unknown)
  let forMs: number
  try {
    forMs = parseDuration(span, 'for')
  } catch (error) {
    if (error instanceof ConfigError) throw new InputError('for', 'a duration like 1h', span)
    throw error
  }
  if (forMs > MAX_CONTROL_MS) throw new InputError('for', 'at most 365 days', span)
  if (typeof reason !== 'string' || reason.length > MAX_REASON_CHARS) {
    throw new InputError('reason', `a string of at most ${MAX_REASON_CHARS} characters`, reason)
  }
  return { forMs, reason }
}

/** A pair's control key by its key (a Redis store's compact pair carries its own). */
const byKey = (e: StoreEntry): string => controlKeyOf(e.key)

/** The distinct control keys of a call's pairs, each found by `of`. */
export function controlKeys(entries: readonly StoreEntry[], of = byKey): string[] {
  const first = entries[0]
  if (first === undefined) return []
  if (entries.length === 1) return [of(first)]
  const keys: string[] = []
  for (const e of entries) {
    const key = of(e)
    if (!keys.includes(key)) keys.push(key)
  }
  return keys
}

interface Held {
  block: number
  reason: string
  allow: number
}

interface Overridden {
  /** End, ms (0: none). */
  ends: number
  spec: string
}

/** An identity's or a pattern's override, its spec parsed by policy name. */
type HeldOverride = Overridden & { limits: Map<string, ParsedOverride> }

/** Block, allow and override entries in memory: the twin of the control keys (and indexes) in Redis. */
export class MemoryControls implements Controls {
  private readonly held = new Map<string, Held>()
  private readonly indexes = new Map<string, Map<string, { ends: number; reason: string }>>()
  private readonly overrides = new Map<string, HeldOverride>()
  private readonly overrideIndexes = new Map<string, Map<string, Overridden>>()
  /** Each limiter prefix's patterns, by pattern prefix. */
  private readonly patterns = new Map<string, Map<string, HeldOverride>>()
  /** A policy with an overridden limit, one per (policy, limit) while held. */
  private readonly policies = new WeakMap<ResolvedPolicy, Map<string, ResolvedPolicy>>()

  constructor(private readonly nowMs: () => number) {}

  set(key: string, kind: 'block' | 'allow', forMs: number, reason: string): Promise<void> {
    const now = this.nowMs()
    const h = this.live(key, now) ?? { block: 0, reason: '', allow: 0 }
    if (kind === 'block') {
      h.block = forMs > 0 ? now + forMs : 0
      h.reason = forMs > 0 ? reason : ''
    } else h.allow = forMs > 0 ? now + forMs : 0
    if (h.block > now || h.allow > now) this.held.set(key, h)
    else this.held.delete(key)
    return Promise.resolve()
  }

  index(indexKey: string, identity: string, forMs: number, reason: string): Promise<void> {
    const index = this.indexes.get(indexKey) ?? new Map<string, { ends: number; reason: string }>()
    this.indexes.set(indexKey, index)
    if (forMs > 0) index.set(identity, { ends: this.nowMs() + forMs, reason })
    else index.delete(identity)
    return Promise.resolve()
  }

  list(indexKey: string, max: number): Promise<ControlEntry[]> {
    const now = this.nowMs()
    const out: ControlEntry[] = []
    const index = this.indexes.get(indexKey)
    for (const [identity, { ends, reason }] of index ?? []) {
      if (ends <= now) index!.delete(identity)
      else if (out.length < max) out.push({ identity, reason, expiresInMs: ends - now })
    }
    return Promise.resolve(out)
  }

  setOverride(key: string, spec: string, ttlMs: number): Promise<void> {
    if (spec === '') this.overrides.delete(key)
    else
      this.overrides.set(key, { ends: ttlMs > 0 ? this.nowMs() + ttlMs : 0, spec, limits: parseSpec(spec) })
    return Promise.resolve()
  }

  getOverride(key: string): Promise<{ spec: string; expiresInMs: number } | undefined> {
    const now = this.nowMs()
    const o = this.liveOverride(key, now)
    return Promise.resolve(o && { spec: o.spec, expiresInMs: o.ends > 0 ? o.ends - now : -1 })
  }

  indexOverride(indexKey: string, identity: string, spec: string, ttlMs: number, max: number): Promise<void> {
    const index = this.overrideIndexes.get(indexKey) ?? new Map<string, Overridden>()
    this.overrideIndexes.set(indexKey, index)
    if (spec === '') index.delete(identity)
    else if (!index.has(identity) && index.size >= max) {
      return Promise.reject(new Error(`tollgate overrides: the index is full (${max} identities)`))
    } else index.set(identity, { ends: ttlMs > 0 ? this.nowMs() + ttlMs : 0, spec })
    return Promise.resolve()
  }

  listOverrides(
    indexKey: string,
    max: number,
  ): Promise<{ identity: string; spec: string; expiresInMs: number }[]> {
    const now = this.nowMs()
    const out: { identity: string; spec: string; expiresInMs: number }[] = []
    const index = this.overrideIndexes.get(indexKey)
    for (const [identity, { ends, spec }] of index ?? []) {
      if (ends > 0 && ends <= now) index!.delete(identity)
      else if (out.length < max) out.push({ identity, spec, expiresInMs: ends > 0 ? ends - now : -1 })
    }
    return Promise.resolve(out)
  }

  /**
   * The call's entries under their identities' live overrides at `nowMs` (twin of ctl_over: the burst
   * follows the limit when it was the default), and each pair's overridden limit; undefined when none
   * applies.
   */
  overridden(
    entries: readonly StoreEntry[],
    nowMs: number,
  ): { entries: StoreEntry[]; limits: (number | undefined)[] } | undefined {
    if (this.overrides.size === 0 && this.patterns.size === 0) return undefined
    let out: { entries: StoreEntry[]; limits: (number | undefined)[] } | undefined
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!
      // an identity's own override, else the longest live pattern it starts with (as ctl_read)
      const own = this.liveOverride(controlKeyOf(e.key), nowMs) ?? this.pattern(e, nowMs)
      const o = own?.limits.get(keyPolicyName(e.key))
      if (o === undefined) continue
      out ??= { entries: [...entries], limits: new Array(entries.length) }
      out.entries[i] = { ...e, policy: this.policyWith(e.policy, o) }
      out.limits[i] = o.limit
    }
    return out
  }

  private patternVersion = 0

  setPattern(prefix: string, pattern: string, spec: string, ttlMs: number, max: number): Promise<number> {
    let table = this.patterns.get(prefix)
    if (table === undefined) {
      table = new Map()
      this.patterns.set(prefix, table)
    }
    const now = this.nowMs()
    if (spec === '') table.delete(pattern)
    else {
      if (!table.has(pattern) && table.size >= max) {
        for (const [p, o] of table) if (o.ends > 0 && o.ends <= now) table.delete(p)
        if (table.size >= max) {
          return Promise.reject(new Error(`tollgate overrides: the pattern table is full (${max} patterns)`))
        }
      }
      table.set(pattern, { ends: ttlMs > 0 ? now + ttlMs : 0, spec, limits: parseSpec(spec) })
    }
    return Promise.resolve(++this.patternVersion)
  }

  listPatterns(prefix: string): Promise<{ pattern: string; spec: string; expiresInMs: number }[]> {
    const now = this.nowMs()
    const out: { pattern: string; spec: string; expiresInMs: number }[] = []
    for (const [pattern, { ends, spec }] of this.patterns.get(prefix) ?? []) {
      if (ends === 0 || ends > now) out.push({ pattern, spec, expiresInMs: ends > 0 ? ends - now : -1 })
    }
    return Promise.resolve(out)
  }

  /** The longest live pattern an entry's identity starts with, in its key's prefix. */
  private pattern(e: StoreEntry, now: number): HeldOverride | undefined {
    if (e.identity === undefined || this.patterns.size === 0) return undefined
    const table = this.patterns.get(prefixOfKey(e.key))
    let best: HeldOverride | undefined
    let length = -1
    for (const [pattern, o] of table ?? []) {
      if (pattern.length > length && e.identity.startsWith(pattern) && (o.ends === 0 || o.ends > now)) {
        best = o
        length = pattern.length
      }
    }
    return best
  }

  /** `base` under an override (its limit, its billing day): one object per pair, as twins cache by policy. */
  private policyWith(base: ResolvedPolicy, o: ParsedOverride): ResolvedPolicy {
    let byOverride = this.policies.get(base)
    if (byOverride === undefined) {
      byOverride = new Map()
      this.policies.set(base, byOverride)
    }
    const id = `${o.limit ?? ''}@${o.billingDay ?? ''}`
    let p = byOverride.get(id)
    if (p === undefined) {
      p = o.limit === undefined ? base : withLimit(base, o.limit)
      // as ctl_over: a billing day applies to a calendar window only
      if (o.billingDay !== undefined && p.calendar)
        p = { ...p, calendar: withAnchor(p.calendar, o.billingDay) }
      byOverride.set(id, p)
    }
    return p
  }

  private liveOverride(key: string, now: number): HeldOverride | undefined {
    const o = this.overrides.get(key)
    if (o && o.ends > 0 && o.ends <= now) {
      this.overrides.delete(key)
      return undefined
    }
    return o
  }

  /**
   * The call's state at `nowMs` (twin of ctl_read): -1 and the longest block left if an identity is
   * blocked, 1 if every identity is allowed, else 0.
   */
  state(entries: readonly StoreEntry[], nowMs: number): { ctl: number; left: number } {
    if (this.held.size === 0) return { ctl: 0, left: 0 }
    const keys = controlKeys(entries)
    let ctl = 0
    let left = 0
    let allowed = 0
    for (const key of keys) {
      const h = this.live(key, nowMs)
      if (h && h.block > nowMs) {
        ctl = -1
        left = Math.max(left, h.block - nowMs)
      } else if (h && h.allow > nowMs) allowed++
    }
    if (ctl === 0 && allowed === keys.length) ctl = 1
    return { ctl, left }
  }

  private live(key: string, now: number): Held | undefined {
    const h = this.held.get(key)
    if (h && h.block <= now && h.allow <= now) {
      this.held.delete(key)
      return undefined
    }
    return h
  }
}

/** A result as a block (ctl == -1) or allow entries (1) leave it: twin of ctl_block / ctl_allow. */
export function applyControl(r: StoreResult, ctl: number, left: number): StoreResult {
  if (ctl === 1) return { ...r, allowed: true, retryAfterMs: 0, tag: CONTROL_ALLOW_TAG }
  const retry = r.retryAfterMs !== -1 && r.retryAfterMs < left ? left : r.retryAfterMs
  return {
    ...r,
    allowed: false,
    retryAfterMs: retry,
    resetMs: Math.max(r.resetMs, left),
    tag: CONTROL_BLOCK_TAG,
  }
}
