/**
 * The algorithm registry and policy validation (shared by every algorithm).
 * @module
 */
import { CALENDAR_NOMINAL_MS, isCalendarWindow, resolveCalendar } from '../calendar'
import { parseDuration } from '../duration'
import { ConfigError } from '../errors'
import { validatePolicyName } from '../keys'
import { check, rejectUnknown } from '../options'
import { resolvePenalty } from '../penalty'
import type { Algorithm, ResolvedPolicy } from '../types'
import { concurrency, isConcurrencyOptions, resolveConcurrency } from './concurrency'
import { fixedWindow } from './fixed-window'
import { gcra } from './gcra'
import { slidingLog } from './sliding-log'
import { slidingWindow } from './sliding-window'
import { tokenBucket } from './token-bucket'
import type { Twin } from './types'

/** Every algorithm's twin by name. */
export const TWINS: Record<Algorithm, Twin<any>> = {
  'fixed-window': fixedWindow,
  'sliding-window': slidingWindow,
  'sliding-log': slidingLog,
  'token-bucket': tokenBucket,
  gcra,
  concurrency,
}

/**
 * The rate algorithms (what `algorithm` takes next to `limit` and `window`). A concurrency limit is a
 * `{ concurrency, lease }` policy, not one of these.
 */
export const ALGORITHMS: readonly Algorithm[] = (Object.keys(TWINS) as Algorithm[]).filter(
  (a) => a !== 'concurrency',
)

/** Each algorithm's number in the scripts' ARGV (docs/scripts.md): 1 fixed-window … 5 gcra, 6 concurrency. */
export const ALGORITHM_CODES = Object.fromEntries(
  (Object.keys(TWINS) as Algorithm[]).map((a) => [a, TWINS[a].code]),
) as Readonly<Record<Algorithm, number>>

/**
 * The codes of the window algorithms under `storage: 'compact'` (a bucket hash's field instead of a key:
 * lua/includes/compact.lua), after the algorithms' own.
 */
export const COMPACT_CODES = { 'fixed-window': 7, 'sliding-window': 8 } as const

/** The code of a calendar window (a fixed window whose periods follow the calendar: calendar.lua). */
export const CALENDAR_CODE = 9

/** The most units one policy may grant: keeps every product below 2^53 inside Lua doubles. */
export const MAX_LIMIT = 1_000_000_000
/** sliding-log stores one member per unit: a bigger limit belongs in a counter algorithm. */
export const MAX_LOG_LIMIT = 10_000
/** sliding-window packs its two counters into one integer (curr + prev x 2^26), each below 2^26. */
export const MAX_SLIDING_LIMIT = 2 ** 26 - 1

const POLICY_KEYS = new Set(['limit', 'window', 'algorithm', 'burst', 'penalty'])
const checkAlgorithm = check.oneOf(ALGORITHMS)

function positiveInt(value: unknown, option: string, max: number): number {
  check.positiveInt(value, option, max)
  return value as number
}

/**
 * Validates one policy's options and resolves its defaults. Throws `ConfigError` naming the option
 * path (e.g. `policies.ip.window`) and the value received.
 */
export function resolvePolicy(name: string, options: unknown, path: string): ResolvedPolicy {
  check.object(options, path.replace(/\.$/, '') || 'policy')
  const o = options as Record<string, unknown>
  if (isConcurrencyOptions(o)) {
    const policyName = validatePolicyName(name, path ? `${path.replace(/\.$/, '')}` : 'policy name')
    return { name: policyName, ...resolveConcurrency(o, path) }
  }
  rejectUnknown(options as object, POLICY_KEYS, path)
  const calendar = isCalendarWindow(o.window) ? resolveCalendar(o.window, `${path}window`) : undefined
  // A calendar period has no constant length: only a count per period (the fixed window) follows it.
  const algorithm = (o.algorithm ?? (calendar ? 'fixed-window' : 'sliding-window')) as Algorithm
  checkAlgorithm(algorithm, `${path}algorithm`)
  if (calendar) checkCalendar(o, algorithm, path)
  const limit = positiveInt(
    o.limit,
    `${path}limit`,
    algorithm === 'sliding-log'
      ? MAX_LOG_LIMIT
      : algorithm === 'sliding-window'
        ? MAX_SLIDING_LIMIT
        : MAX_LIMIT,
  )
  const windowMs = calendar ? CALENDAR_NOMINAL_MS[calendar.unit] : parseDuration(o.window, `${path}window`)
  let burst = limit
  if (o.burst !== undefined) {
    if (algorithm !== 'token-bucket' && algorithm !== 'gcra') {
      throw new ConfigError(`${path}burst`, "unset unless algorithm is 'token-bucket' or 'gcra'", o.burst)
    }
    burst = positiveInt(o.burst, `${path}burst`, MAX_LIMIT)
  }
  if (algorithm === 'token-bucket' || algorithm === 'gcra') {
    // burst x interval (us) must stay an exact integer in a double.
    const interval = Math.ceil((windowMs * 1000) / limit)
    if (burst * interval > 2 ** 52) {
      throw new ConfigError(
        `${path}burst`,
        `small enough that burst x window / limit stays under 2^52 us`,
        burst,
      )
    }
  } else if (!calendar && limit * windowMs > 2 ** 52) {
    throw new ConfigError(`${path}limit`, `small enough that limit x window (ms) stays under 2^52`, limit)
  }
  const resolved: ResolvedPolicy = {
    name: validatePolicyName(name, path ? `${path.replace(/\.$/, '')}` : 'policy name'),
    algorithm,
    limit,
    windowMs,
    burst,
  }
  if (calendar) return { ...resolved, calendar }
  return o.penalty === undefined
    ? resolved
    : { ...resolved, penalty: resolvePenalty(o.penalty, path, windowMs) }
}

/**
 * What a calendar window takes: the fixed window only (sliding windows, GCRA and the token bucket refill
 * at a rate of `limit` per constant window length, which a month or a DST day does not have), and no
 * penalty (its counting window would be the nominal length, not the period).
 */
function checkCalendar(o: Record<string, unknown>, algorithm: Algorithm, path: string): void {
  if (algorithm !== 'fixed-window') {
    throw new ConfigError(`${path}algorithm`, "'fixed-window' (or unset) with a calendar window", algorithm)
  }
  if (o.penalty !== undefined) {
    throw new ConfigError(`${path}penalty`, 'unset with a calendar window', o.penalty)
  }
}
