import { ConfigError } from './errors'

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
// A decimal amount ('1.5s', '0.25h') is accepted when it is a whole number of ms: the `Duration` type
// admits any `${number}` before the unit, so the parser must not be narrower than the type promises.
const DURATION = /^(\d+)(?:\.(\d+))?(ms|s|m|h|d)$/

/**
 * Longest window accepted: 1 year. Redis can expire further out, but state must also stay exact in
 * integer microseconds inside Lua doubles (limit × window is bounded separately).
 */
const MAX_WINDOW_MS = 365 * 86_400_000

/**
 * Parses a window: milliseconds as a positive safe integer, or `'500ms' | '10s' | '15m' | '1h' | '1d'`
 * (a decimal amount such as `'1.5s'` when it is a whole number of milliseconds).
 * Throws `ConfigError` naming `option` otherwise.
 *
 * @example
 * parseDuration('15m', 'window') // 900000
 */
export function parseDuration(value: unknown, option: string): number {
  let ms: number
  if (typeof value === 'number') {
    ms = value
  } else if (typeof value === 'string') {
    const match = DURATION.exec(value.trim())
    if (!match) {
      throw new ConfigError(
        option,
        "a number of ms or a string like '500ms', '10s', '15m', '1h', '1d'",
        value,
        'type',
      )
    }
    // DURATION's amount and unit groups are not optional, and the unit is one of UNIT_MS
    ms = exactMs(match[1]!, match[2] ?? '', UNIT_MS[match[3]!]!)
  } else {
    throw new ConfigError(option, "a number of ms or a string like '10s'", value, 'type')
  }
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new ConfigError(option, 'a positive whole number of milliseconds', value)
  }
  if (ms > MAX_WINDOW_MS) throw new ConfigError(option, `at most ${MAX_WINDOW_MS} ms (365 days)`, value)
  return ms
}

/** `int.frac` × `unit` ms in integers (no float rounding: '1.1s' is 1100, not 1100.0000000000002). */
function exactMs(int: string, frac: string, unit: number): number {
  if (frac === '') return Number(int) * unit
  const scale = 10 ** frac.length
  const fracUnits = Number(frac) * unit
  // Not a whole number of ms (e.g. '1.5ms'): NaN, which the caller reports as not a whole number.
  if (!Number.isSafeInteger(scale) || fracUnits % scale !== 0) return Number.NaN
  return Number(int) * unit + fracUnits / scale
}
