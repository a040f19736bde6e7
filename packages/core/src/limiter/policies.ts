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
}

function policySet(
  policies: readonly ResolvedPolicy[],
  shadowNames: ReadonlySet<string> | undefined,
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
  }
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
    const policies = [resolvePolicy(SINGLE_POLICY, inline, '')]
    return policySet(policies, shadow ? new Set([SINGLE_POLICY]) : undefined)
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
  const policies = Object.entries(named).map(([policy, p]) => {
    // `shadow` is the limiter's concern, not the store's: strip it before the policy is resolved.
    if (typeof p === 'object' && p !== null && 'shadow' in p) {
      const { shadow: policyShadow, ...rest } = p
      check.bool(policyShadow, `policies.${policy}.shadow`)
      if (policyShadow) shadowed.push(policy)
      return resolvePolicy(policy, rest, `policies.${policy}.`)
    }
    return resolvePolicy(policy, p, `policies.${policy}.`)
  })
  if (shadow) return policySet(policies, new Set(policies.map((p) => p.name)))
  return policySet(policies, shadowed.length > 0 ? new Set(shadowed) : undefined)
}
