/**
 * Per-request limits: a plan's or a tenant's limit that is data, resolved per call
 * (`limiter.consume(key, { limits: { daily: plan.daily } })`, or an adapter's `limits` function), sent to
 * the script as its ARGV like any limit: no limiter per value, no second round trip. Each value is
 * validated per call as the limiter validates its options (a bad one is an `InputError`: the call is
 * refused before Redis, never admitted), and the overridden policies are cached per value (bounded), so
 * a plan seen before costs no allocation and reuses its ARGV strings.
 * @module
 */
import { MAX_LIMIT, MAX_LOG_LIMIT, MAX_SLIDING_LIMIT } from './algorithms'
import { InputError } from './errors'
import type { ResolvedPolicy, StoreEntry } from './types'

/** Distinct limits cached per policy (a limiter's plans; past it the cache starts over). */
export const MAX_CACHED_LIMITS = 1024

/** A call's `limits` option: one number (a single-policy limiter), or limits by policy name. */
export type CallLimits = number | Readonly<Record<string, number>>

function maxLimit(p: ResolvedPolicy): number {
  return p.algorithm === 'sliding-log'
    ? MAX_LOG_LIMIT
    : p.algorithm === 'sliding-window'
      ? MAX_SLIDING_LIMIT
      : MAX_LIMIT
}

/**
 * The policy `base` with `limit` units per window (its `burst` follows when it was the default, `= limit`),
 * or an `InputError` naming `argument` when the value is not one the limiter would accept as an option.
 */
export function checkLimit(base: ResolvedPolicy, limit: unknown, argument: string): number {
  const max = maxLimit(base)
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > max) {
    throw new InputError(argument, `a positive integer no larger than ${max}`, limit)
  }
  const burst = base.burst === base.limit ? limit : base.burst
  const bounded =
    base.algorithm === 'token-bucket' || base.algorithm === 'gcra'
      ? burst * Math.ceil((base.windowMs * 1000) / limit) <= 2 ** 52
      : base.calendar !== undefined || limit * base.windowMs <= 2 ** 52
  if (!bounded)
    throw new InputError(argument, 'small enough for the policy window (see docs/errors.md)', limit)
  return limit
}

/** `base` with `limit` units per window; its burst follows when it was the default (`= limit`). */
export function withLimit(base: ResolvedPolicy, limit: number): ResolvedPolicy {
  return { ...base, limit, burst: base.burst === base.limit ? limit : base.burst }
}

/** The overridden policies of one limiter, cached per (policy, limit). */
export class LimitOverrides {
  private readonly cache = new Map<ResolvedPolicy, Map<number, ResolvedPolicy>>()
  /** Whether any call has overridden a limit (until then, decisions need not look for overrides). */
  used = false

  constructor(
    private readonly policies: readonly ResolvedPolicy[],
    private readonly byName: ReadonlyMap<string, ResolvedPolicy>,
  ) {}

  /** `base` with `limit` (validated): the same object for the same pair while cached. */
  policy(base: ResolvedPolicy, limit: unknown, argument: string): ResolvedPolicy {
    return this.stored(base, checkLimit(base, limit, argument))
  }

  /** The call's entries with `limits` applied (InputError for an unknown policy or a bad value). */
  apply(entries: StoreEntry[], limits: unknown): StoreEntry[] {
    if (typeof limits === 'number') {
      if (this.policies.length !== 1) {
        throw new InputError(
          'limits',
          'a record of policy name to limit (this limiter has several policies)',
          limits,
        )
      }
      const e = entries[0]!
      return [{ ...e, policy: this.policy(e.policy, limits, 'limits') }]
    }
    if (typeof limits !== 'object' || limits === null) {
      throw new InputError('limits', 'a number or a record of policy name to limit', limits)
    }
    const names = Object.keys(limits)
    if (names.length > this.policies.length) {
      throw new InputError(
        'limits',
        `at most one limit per policy (${this.policies.length})`,
        `${names.length} names`,
      )
    }
    for (const name of names) {
      if (!this.byName.has(name)) {
        throw new InputError(`limits.${name}`, 'a policy name of this limiter', name)
      }
    }
    const record = limits as Readonly<Record<string, unknown>>
    return entries.map((e) => {
      const name = e.policy.name
      if (!Object.hasOwn(record, name) || record[name] === undefined) return e
      return { ...e, policy: this.policy(e.policy, record[name], `limits.${name}`) }
    })
  }

  /**
   * `base` under a limit a stored override set (validated when it was set, so not again here: a decision
   * already made must not throw).
   */
  stored(base: ResolvedPolicy, limit: number): ResolvedPolicy {
    if (limit === base.limit) return base
    this.used = true
    let byLimit = this.cache.get(base)
    if (byLimit === undefined) {
      byLimit = new Map()
      this.cache.set(base, byLimit)
    }
    let policy = byLimit.get(limit)
    if (policy === undefined) {
      policy = withLimit(base, limit)
      if (byLimit.size >= MAX_CACHED_LIMITS) byLimit.clear()
      byLimit.set(limit, policy)
    }
    return policy
  }

  /** The policy a refund token names, with the limit it was spent under. */
  spentUnder(base: ResolvedPolicy, limit: number | undefined): ResolvedPolicy {
    return limit === undefined || limit === base.limit ? base : this.policy(base, limit, 'decision')
  }
}
