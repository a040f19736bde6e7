import { ConfigError } from './errors'

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const DURATION = /^(\d+)(ms|s|m|h|d)$/

/**
 * Longest window accepted: 1 year. Redis can expire further out, but state must also stay exact in
 * integer microseconds inside Lua doubles (limit × window is bounded separately).
 */
export const MAX_WINDOW_MS = 365 * 86_400_000

/**
 * Parses a window: milliseconds as a positive safe integer, or `'500ms' | '10s' | '15m' | '1h' | '1d'`.
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
    ms = Number(match[1]) * UNIT_MS[match[2]]
  } else {
    throw new ConfigError(option, "a number of ms or a string like '10s'", value, 'type')
  }
  if (!Number.isSafeInteger(ms) || ms <= 0) {
    throw new ConfigError(option, 'a positive whole number of milliseconds', value)
  }
  if (ms > MAX_WINDOW_MS) throw new ConfigError(option, `at most ${MAX_WINDOW_MS} ms (365 days)`, value)
  return ms
}
