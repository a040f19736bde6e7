/**
 * Per-identity overrides: a customer's limits set at runtime (`limiter.overrides.set`), kept in the
 * identity's control key and applied by the decision scripts (lua/includes/control.lua). What `set`
 * accepts, the stored form (`<policy>=<limit>,...`; policy '' for a limiter with one inline policy), and
 * the twin of the scripts' lookup for MemoryStore.
 * @module
 */
import { parseDuration } from './duration'
import { ConfigError, InputError } from './errors'
import { checkLimit } from './limits'
import type { ResolvedPolicy } from './types'

/** The most identities with overrides one prefix holds (its index refuses more). */
export const MAX_OVERRIDES = 100_000
/** The longest override with an end: a year, as blocks (an override may also have none). */
const MAX_TTL_MS = 365 * 86_400_000
/** The most overrides `overrides.list()` returns by default, and at most. */
export const MAX_LISTED_OVERRIDES = 1000

/** An override of one policy: its limit, and for a calendar month its first day (a billing day). */
export interface PolicyOverride {
  readonly limit?: number
  /**
   * The day of the month, 1 to 31, each period starts on for this identity (a month shorter than that
   * starts on its last day), at 00:00 in the policy's time zone. Only for `{ calendar: 'month' }` windows.
   */
  readonly billingDay?: number
}

/**
 * An identity's overrides: by policy name (`{ monthly: { limit: 500_000 } }`), or `{ limit }` for a
 * limiter with one inline policy.
 */
export type OverrideLimits = Readonly<Record<string, PolicyOverride>> | PolicyOverride

/** Options of `overrides.set`. */
export interface OverrideOptions {
  /** How long the override lasts (at most 365 days), from the store's clock. @default no end */
  ttl?: number | string
}

/** One identity's live overrides, as `overrides.list()` returns them. */
export interface OverrideEntry {
  readonly identity: string
  readonly limits: OverrideLimits
  /** Time left, ms; `Infinity` for an override without end. */
  readonly expiresInMs: number
}

/** The policies an override may name: the limiter's, by name, and whether it has one inline policy. */
export interface OverrideTarget {
  readonly byName: ReadonlyMap<string, ResolvedPolicy>
  readonly single: boolean
}

/** One policy's override as stored: `<limit>`, `<limit>@<day>` or `@<day>` (the policy's own limit). */
function checkOne(base: ResolvedPolicy, value: unknown, argument: string): string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InputError(argument, 'an object like { limit: 500000 }', value)
  }
  const { limit, billingDay, ...rest } = value as PolicyOverride
  const unknown = Object.keys(rest)[0]
  if (unknown !== undefined) throw new InputError(argument, 'only limit and billingDay', unknown)
  if (limit === undefined && billingDay === undefined) {
    throw new InputError(argument, 'a limit, a billingDay or both', value)
  }
  const shown = limit === undefined ? '' : String(checkLimit(base, limit, `${argument}.limit`))
  if (billingDay === undefined) return shown
  if (base.calendar?.unit !== 'month') {
    throw new InputError(
      `${argument}.billingDay`,
      "unset (only a { calendar: 'month' } window has one)",
      billingDay,
    )
  }
  if (!Number.isSafeInteger(billingDay) || billingDay < 1 || billingDay > 31) {
    throw new InputError(`${argument}.billingDay`, 'an integer from 1 to 31', billingDay)
  }
  return `${shown}@${billingDay}`
}

/** `limits` checked against the limiter's policies (InputError before any store command), as stored. */
export function encodeOverrides(target: OverrideTarget, limits: unknown): string {
  if (target.single) {
    const base = target.byName.values().next().value as ResolvedPolicy
    return `=${checkOne(base, limits, 'limits')}`
  }
  if (typeof limits !== 'object' || limits === null || Array.isArray(limits)) {
    throw new InputError('limits', 'a record of policy name to { limit }', limits)
  }
  const names = Object.keys(limits)
  if (names.length === 0) throw new InputError('limits', 'at least one policy', limits)
  const parts: string[] = []
  for (const name of names) {
    const base = target.byName.get(name)
    if (base === undefined) throw new InputError(`limits.${name}`, 'a policy name of this limiter', name)
    const value = (limits as Record<string, unknown>)[name]
    parts.push(`${name}=${checkOne(base, value, `limits.${name}`)}`)
  }
  return parts.join(',')
}

/** A stored spec as `overrides.get` shows it: `{ limit }` for a one-policy limiter's (policy ''). */
export function decodeOverrides(spec: string): OverrideLimits {
  const map = parseSpec(spec)
  const single = map.get('')
  if (single !== undefined) return shown(single)
  const out: Record<string, PolicyOverride> = {}
  for (const [name, o] of map) out[name] = shown(o)
  return out
}

function shown(o: ParsedOverride): PolicyOverride {
  if (o.billingDay === undefined) return { limit: o.limit! }
  return o.limit === undefined ? { billingDay: o.billingDay } : { limit: o.limit, billingDay: o.billingDay }
}

/** One policy's stored override: a limit, a billing day, or both. */
export interface ParsedOverride {
  readonly limit?: number
  readonly billingDay?: number
}

/** A spec's overrides by policy name (the twin of control.lua's ctl_parse). */
export function parseSpec(spec: string): Map<string, ParsedOverride> {
  const map = new Map<string, ParsedOverride>()
  for (const part of spec.split(',')) {
    const m = /^([^=]*)=(\d*)(?:@(\d+))?$/.exec(part)
    if (m === null || (m[2] === '' && m[3] === undefined)) continue
    map.set(m[1]!, {
      ...(m[2] !== '' && { limit: Number(m[2]) }),
      ...(m[3] !== undefined && { billingDay: Number(m[3]) }),
    })
  }
  return map
}

/** `overrides.set`'s ttl in ms (0: no end), or an InputError. */
export function checkTtl(options: unknown): number {
  if (options === undefined) return 0
  if (typeof options !== 'object' || options === null) {
    throw new InputError('override options', "an object like { ttl: '30d' }", options)
  }
  const { ttl, ...rest } = options as OverrideOptions
  const unknown = Object.keys(rest)[0]
  if (unknown !== undefined) throw new InputError('override options', 'only ttl', unknown)
  if (ttl === undefined) return 0
  let ms: number
  try {
    ms = parseDuration(ttl, 'ttl')
  } catch (error) {
    if (error instanceof ConfigError) throw new InputError('ttl', 'a duration like 30d', ttl)
    throw error
  }
  if (ms > MAX_TTL_MS) throw new InputError('ttl', 'at most 365 days (omit it for no end)', ttl)
  return ms
}

/**
 * The policy name in a pair key, `<prefix>:{<tag>}:<policy>:<sig>`, or '' for a one-policy limiter's
 * `<prefix>:{<tag>}:<sig>` (the twin of control.lua's ctl_over).
 */
export function keyPolicyName(key: string): string {
  const m = /\}:([^:]+):[^:]*$/.exec(key)
  return m ? m[1]! : ''
}
