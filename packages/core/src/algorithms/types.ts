import type { ResolvedPolicy } from '../types'

/**
 * What the in-memory twin of one algorithm's Lua does. The Lua in `lua/algorithms/<name>.lua` and this twin
 * must give the same numbers for the same server time: the conformance suite feeds the twin the
 * `TIME` that Redis reported for each call and compares.
 */
export interface Check<S> {
  allowed: boolean
  remaining: number
  resetMs: number
  /** -1 = never. */
  retryMs: number
  tag: number
  /** The internal state the commit will start from. */
  readonly base: S
}

export interface Twin<S> {
  /** The algorithm's number in the scripts' ARGV. */
  readonly code: number
  check(state: S | undefined, nowUs: number, p: ResolvedPolicy, cost: number): Check<S>
  /** Applies a spend of `cost` to an allowed check; updates its remaining/resetMs; returns new state + expiry. */
  commit(c: Check<S>, nowUs: number, p: ResolvedPolicy, cost: number): Stored<S>
  /** Returns the new state after a refund, or undefined to delete it; `state` is the current one. */
  refund(
    state: S | undefined,
    nowUs: number,
    p: ResolvedPolicy,
    tag: number,
    cost: number,
  ): Stored<S> | undefined
}

/** State with the absolute expiry (ms) Redis would give the key. */
interface Stored<S> {
  state: S
  expiresAtMs: number
}

/** ceil(us / 1000) as Lua computes it. */
export const ceilMs = (us: number): number => Math.ceil(us / 1000)
