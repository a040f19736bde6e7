/**
 * RFC 9651 Structured Field values as the RateLimit fields use them: sf-strings, non-negative
 * sf-integers, and durations as whole seconds that fit an sf-integer. Every time is rounded up, so a
 * client that honours it never comes back early.
 * @module
 */

/** Largest sf-integer (RFC 9651 §3.3.1: at most 15 digits). */
export const SF_INTEGER_MAX = 999_999_999_999_999

/**
 * Serialises text as an RFC 9651 sf-string: in double quotes, with `"` and `\` escaped.
 *
 * @throws TypeError for characters an sf-string cannot hold (controls, non-ASCII). Policy names are
 * validated at construction, so this only fires on a bug; an invalid field is never emitted.
 * @example
 * sfString('burst')   // '"burst"'
 * sfString('a"b\\c')  // '"a\\"b\\\\c"'
 */
export function sfString(text: string): string {
  let plain = true
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x20 || c > 0x7e) {
      throw new TypeError(
        `${JSON.stringify(text)} cannot be sent as a Structured Field string (printable ASCII only)`,
      )
    }
    if (c === 0x22 || c === 0x5c) plain = false
  }
  if (plain) return `"${text}"`
  let out = '"'
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    out += ch === '"' || ch === '\\' ? `\\${ch}` : ch
  }
  return `${out}"`
}

/** A count as a non-negative sf-integer (rounded down, so remaining quota is never overstated). */
export function sfInteger(n: number): number {
  if (!(n > 0)) return 0
  const v = Math.floor(n)
  return Math.min(v, SF_INTEGER_MAX)
}

/** Milliseconds to whole seconds, rounded up; NaN and negatives are 0; capped to an sf-integer. */
export function ceilSeconds(ms: number): number {
  if (!(ms > 0)) return 0
  const s = Math.ceil(ms / 1000)
  return Math.min(s, SF_INTEGER_MAX)
}

/** A window in whole seconds: rounded up, at least 1 (the drafts have no sub-second windows). */
export function windowSeconds(ms: number): number {
  return Math.max(1, ceilSeconds(ms))
}

/** A duration for arithmetic: NaN and negatives are 0, Infinity is capped (no `Infinity` in a header). */
export function boundedMs(ms: number): number {
  return Math.min(Math.max(0, ms || 0), SF_INTEGER_MAX)
}
