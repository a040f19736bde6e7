/**
 * concurrency: at most `limit` units in flight per key, each held by a lease that ends when released
 * (`limiter.release(decision)`, or a refund) or when it expires, `lease` ms after it was taken. Twin of
 * `lua/algorithms/concurrency.lua`, and the validation of `{ concurrency, lease }` policies.
 * @module
 */
import { parseDuration } from '../duration'
import { ConfigError } from '../errors'
import type { Duration, ResolvedPolicy } from '../types'
import type { Twin } from './types'

/**
 * A policy that bounds how many requests (or jobs) of one identity are in flight at once, across every
 * process. Combine it with rate policies in `policies: { … }`: one call checks all of them atomically.
 *
 * @example
 * new RateLimiter({ store, policies: {
 *   rate: { limit: 100, window: '1m' },
 *   inflight: { concurrency: 5, lease: '30s' },   // at most 5 at once, each slot back after 30 s at worst
 * } })
 */
export interface ConcurrencyPolicyOptions {
  /** Most units in flight at once (a positive integer up to 10,000). */
  concurrency: number
  /**
   * How long a slot stays taken if it is never released (a crashed process, a lost release): set it a
   * little above your longest request or job. A refused call's `retryAfterMs` is bounded by it.
   * @default '60s'
   */
  lease?: Duration
  /** As for rate policies: decide and report, never refuse. @default false */
  shadow?: boolean
  /** Spelled out, if you like: `'concurrency'` is the only value accepted here. */
  algorithm?: 'concurrency'
}

/** The default lease: long enough for a slow request, short enough that a crash frees a slot soon. */
export const DEFAULT_LEASE_MS = 60_000
/** Most slots of one policy: each held unit is a sorted-set member. */
export const MAX_CONCURRENCY = 10_000
/** The longest lease accepted (a job longer than a day should renew, not hold one lease). */
export const MAX_LEASE_MS = 86_400_000

const KEYS = new Set(['concurrency', 'lease', 'algorithm'])

/** Whether a policy's options ask for a concurrency limit (then {@link resolveConcurrency} validates them). */
export function isConcurrencyOptions(o: Record<string, unknown>): boolean {
  return o.concurrency !== undefined || o.lease !== undefined || o.algorithm === 'concurrency'
}

/** Validates `{ concurrency, lease }`; throws `ConfigError` naming the option path and the value. */
export function resolveConcurrency(o: Record<string, unknown>, path: string): Omit<ResolvedPolicy, 'name'> {
  for (const name of Object.keys(o)) {
    if (KEYS.has(name) || o[name] === undefined) continue
    const hint =
      name === 'limit'
        ? "; a concurrency policy's limit is 'concurrency'"
        : name === 'window'
          ? "; a concurrency policy has a 'lease', not a window"
          : ''
    throw new ConfigError(
      `${path}${name}`,
      `an option of a concurrency policy (concurrency, lease)${hint}`,
      o[name],
      'type',
    )
  }
  if (o.algorithm !== undefined && o.algorithm !== 'concurrency') {
    throw new ConfigError(`${path}algorithm`, "'concurrency' (or omitted) with concurrency", o.algorithm)
  }
  const n = o.concurrency
  if (typeof n !== 'number') {
    throw new ConfigError(`${path}concurrency`, 'a positive integer (most units in flight)', n, 'type')
  }
  if (!Number.isSafeInteger(n) || n <= 0 || n > MAX_CONCURRENCY) {
    throw new ConfigError(`${path}concurrency`, `a positive integer no larger than ${MAX_CONCURRENCY}`, n)
  }
  const leaseMs = o.lease === undefined ? DEFAULT_LEASE_MS : parseDuration(o.lease, `${path}lease`)
  if (leaseMs > MAX_LEASE_MS) {
    throw new ConfigError(`${path}lease`, `at most ${MAX_LEASE_MS} ms (1 day)`, o.lease)
  }
  return { algorithm: 'concurrency', limit: n, windowMs: leaseMs, burst: n }
}

/** Leases as [id, expiresAtMs], in the order they were taken (as the sorted set would hold them). */
type State = [id: number, expiresAtMs: number][]

export const concurrency: Twin<State> = {
  code: 6,
  check(state, nowUs, p, cost) {
    const nowMs = Math.floor(nowUs / 1000)
    const hi = nowMs + p.windowMs
    const base = state ?? []
    const live: number[] = []
    for (const [, exp] of base) if (exp > nowMs && exp <= hi) live.push(exp)
    const count = live.length
    const remaining = Math.max(0, p.limit - count)
    const resetMs = count > 0 ? Math.max(...live) - nowMs : 0
    if (cost > p.limit) return { allowed: false, remaining, resetMs, retryMs: -1, tag: nowUs, base }
    if (count + cost <= p.limit) return { allowed: true, remaining, resetMs, retryMs: 0, tag: nowUs, base }
    live.sort((a, b) => a - b)
    const retryMs = live[count + cost - p.limit - 1]! - nowMs
    return { allowed: false, remaining, resetMs, retryMs, tag: nowUs, base }
  },
  commit(c, nowUs, p, cost) {
    const nowMs = Math.floor(nowUs / 1000)
    const exp = nowMs + p.windowMs
    const held = new Set(c.base.map(([id]) => id))
    let id = nowUs
    for (let j = 0; j < cost; ) {
      if (held.has(id + j)) {
        id += j + 1
        j = 0
      } else j++
    }
    const state: State = c.base.filter(([, e]) => e > nowMs && e <= exp)
    for (let m = 0; m < cost; m++) state.push([id + m, exp])
    c.tag = id
    c.remaining = p.limit - (state.length - cost) - cost
    c.resetMs = p.windowMs
    return { state, expiresAtMs: exp }
  },
  refund(state, _nowUs, _p, tag, cost) {
    if (!state) return undefined
    const left = state.filter(([id]) => id < tag || id >= tag + cost)
    if (left.length === 0) return undefined
    return { state: left, expiresAtMs: Math.max(...left.map(([, e]) => e)) }
  },
}
