/**
 * A limiter's policies from its options: one inline (`limit`, `window`, ...) or named `policies`, each
 * resolved by its algorithm, with the names of those in shadow.
 * @module
 */
import { resolvePolicy } from '../algorithms'
import type { ConcurrencyPolicyOptions } from '../algorithms/concurrency'
import { ConfigError } from '../errors'
import { MAX_POLICIES, SINGLE_POLICY } from '../keys'
import { check } from '../options'
import type { Algorithm, PolicyOptions, ResolvedPolicy } from '../types'

/** A limiter's policies, and what its calls read of them, built once. */
export interface PolicySet {
  /** In declaration order. */
  readonly policies: readonly ResolvedPolicy[]
  /** The same by name (refunds and per-policy costs look them up per call). */
  readonly byName: ReadonlyMap<string, ResolvedPolicy>
  /** Policy names, declaration order (published with each decision; a fallback answer has no pairs). */
  readonly names: readonly string[]
  /** Each policy's algorithm, parallel to `names` (published with each decision). */
  readonly algorithms: readonly Algorithm[]
  /** Names of the policies in shadow (undefined: none). */
  readonly shadowNames: ReadonlySet<string> | undefined
  /** Every policy in shadow (then one store call decides, as without shadow). */
  readonly shadowAll: boolean
  /** Some policy has a penalty. */
  readonly penalised: boolean
  /** Some policy is a concurrency limit (its admitted decisions hold leases). */
  readonly leases: boolean
  /** Each policy's `reserve` (units a process takes at a time), in order; undefined when none has one. */
  readonly reserves: readonly number[] | undefined
}

function policySet(
  policies: readonly ResolvedPolicy[],
  shadowNames: ReadonlySet<string> | undefined,
  reserves?: readonly number[],
): PolicySet {
  return {
    policies,
    byName: new Map(policies.map((p) => [p.name, p])),
    names: policies.map((p) => p.name),
    algorithms: policies.map((p) => p.algorithm),
    shadowNames,
    shadowAll: shadowNames?.size === policies.length,
    penalised: policies.some((p) => p.penalty !== undefined),
    leases: policies.some((p) => p.algorithm === 'concurrency'),
    reserves,
  }
}

/** The algorithms whose units lapse with the window they were taken in (what keeps a reserve exact). */
const RESERVABLE: ReadonlySet<string> = new Set(['fixed-window', 'sliding-window'])

/** Checks a policy's `reserve` against the policy it belongs to. `shadow`: the policy is in shadow. */
function checkReserve(value: unknown, policy: ResolvedPolicy, path: string, shadow: boolean): number {
  const option = `${path}reserve`
  if (!RESERVABLE.has(policy.algorithm))
    throw new ConfigError(option, "unset unless algorithm is 'fixed-window' or 'sliding-window'", value)
  // a reserve's units lapse at the window's end, which a process computes from a constant length
  if (policy.calendar) throw new ConfigError(option, 'unset with a calendar window', value)
  check.positiveInt(value, option, policy.limit)
  if (policy.penalty !== undefined) throw new ConfigError(option, 'unset on a policy with a penalty', value)
  if (shadow) throw new ConfigError(option, 'unset on a policy in shadow', value)
  return value as number
}

/**
 * The named policies' reserves, all or none: one refill takes each policy's units in one atomic call, so
 * every policy needs its own (and a concurrency policy, which holds leases, cannot have one).
 */
function allReserved(
  policies: readonly ResolvedPolicy[],
  reserves: readonly (number | undefined)[],
): number[] | undefined {
  const first = reserves.findIndex((r) => r !== undefined)
  if (first < 0) return undefined
  const leases = policies.find((p) => p.algorithm === 'concurrency')
  if (leases !== undefined) {
    const option = `policies.${policies[first]!.name}.reserve`
    throw new ConfigError(
      option,
      `unset on a limiter with a concurrency policy (${leases.name})`,
      reserves[first],
    )
  }
  const missing = reserves.indexOf(undefined)
  if (missing >= 0) {
    const option = `policies.${policies[missing]!.name}.reserve`
    throw new ConfigError(option, `set, as policy ${policies[first]!.name} has one (all or none)`, undefined)
  }
  return reserves as number[]
}

/** A policy's options without `reserve` (the limiter's concern, not the store's), and its value. */
function withoutReserve(options: unknown): { rest: unknown; reserve: unknown } {
  if (typeof options !== 'object' || options === null || !('reserve' in options))
    return { rest: options, reserve: undefined }
  const { reserve, ...rest } = options as Record<string, unknown>
  return { rest, reserve }
}

/**
 * `named`: the `policies` option; `inline`: the one-policy options (limit, window, algorithm...);
 * `shadow`: the limiter's own `shadow` option (every policy).
 */
export function parsePolicies(
  named: Record<string, PolicyOptions | ConcurrencyPolicyOptions> | undefined,
  inline: Record<string, unknown>,
  shadow: boolean,
): PolicySet {
  if (named === undefined) {
    const { rest, reserve } = withoutReserve(inline)
    const policy = resolvePolicy(SINGLE_POLICY, rest, '')
    const reserved = reserve === undefined ? undefined : [checkReserve(reserve, policy, '', shadow)]
    return policySet([policy], shadow ? new Set([SINGLE_POLICY]) : undefined, reserved)
  }
  if (Object.values(inline).some((v) => v !== undefined)) {
    throw new ConfigError(
      'policies',
      'given alone (not with limit/window/algorithm/burst/penalty)',
      Object.keys(inline),
      'type',
    )
  }
  if (typeof named !== 'object' || named === null || Object.keys(named).length === 0) {
    throw new ConfigError('policies', 'a non-empty object of named policies', named, 'type')
  }
  const count = Object.keys(named).length
  if (count > MAX_POLICIES) {
    throw new ConfigError('policies', `at most ${MAX_POLICIES} named policies`, `${count} policies`)
  }
  const shadowed: string[] = []
  const reserves: (number | undefined)[] = []
  const policies = Object.entries(named).map(([policy, options]) => {
    const path = `policies.${policy}.`
    const { rest: p, reserve } = withoutReserve(options)
    let policyShadow = false
    let resolved: ResolvedPolicy
    // `shadow` is the limiter's concern, not the store's: strip it before the policy is resolved.
    if (typeof p === 'object' && p !== null && 'shadow' in p) {
      const { shadow: own, ...rest } = p as PolicyOptions
      check.bool(own, `${path}shadow`)
      if (own) shadowed.push(policy)
      policyShadow = own === true
      resolved = resolvePolicy(policy, rest, path)
    } else resolved = resolvePolicy(policy, p, path)
    reserves.push(
      reserve === undefined ? undefined : checkReserve(reserve, resolved, path, shadow || policyShadow),
    )
    return resolved
  })
  const reserved = allReserved(policies, reserves)
  if (shadow) return policySet(policies, new Set(policies.map((p) => p.name)), reserved)
  return policySet(policies, shadowed.length > 0 ? new Set(shadowed) : undefined, reserved)
}
