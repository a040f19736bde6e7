/**
 * The checks of a call's options, made before any store command: known names only (with the name a
 * user of another library likely meant), each value of its type, `InputError` otherwise.
 * @module
 */
import { InputError } from '../errors'
import { knownOption, oneOf, STORE_ERROR_POLICIES } from '../options'
import type { CallOptions } from '../types'

/** The per-call option names ({@link CallOptions}), and those of `wait()` ({@link WaitOptions}). */
export const CALL_OPTIONS: ReadonlySet<string> = new Set(['cost', 'onStoreError', 'shadow', 'limits'])
export const WAIT_OPTIONS: ReadonlySet<string> = new Set([
  ...CALL_OPTIONS,
  'maxWaitMs',
  'signal',
  'pollMs',
  'jitter',
])
const NO_OPTIONS: ReadonlySet<string> = new Set()
/** Per-call names of the libraries users come from, and what Tollgate calls them. */
const CALL_OPTION_HINTS: Readonly<Record<string, string>> = {
  points: "'cost'", // rate-limiter-flexible: consume(key, points)
  rate: "'cost'", // @upstash/ratelimit: limit(id, { rate })
  weight: "'cost'",
  tokens: "'cost'",
}
const STORE_ERROR_EXPECTED = oneOf(STORE_ERROR_POLICIES)
const quote = (name: string) => `'${name}'`

/**
 * Checks a call's options as the constructor checks its own (an object, known names only, each value
 * of its type), with `InputError` before any store command; the cost (a number or a record by policy) is
 * checked where it is read, by the limiter. The common call costs no allocation: no options, or only
 * known names, read in place.
 */
export function checkCall(options: CallOptions | undefined, known: ReadonlySet<string>): void {
  if (options === undefined) return
  if (typeof options !== 'object' || options === null) throw new InputError('options', 'an object', options)
  for (const name in options) if (!known.has(name)) rejectUnknownCall(options, known, '')
  const { onStoreError, shadow } = options
  if (
    onStoreError !== undefined &&
    onStoreError !== 'allow' &&
    onStoreError !== 'deny' &&
    onStoreError !== 'local'
  ) {
    throw new InputError('onStoreError', STORE_ERROR_EXPECTED, onStoreError)
  }
  if (shadow !== undefined && typeof shadow !== 'boolean')
    throw new InputError('shadow', 'true or false', shadow)
}

/** Throws for the first name of `options` that `known` lacks, with the name it likely meant. */
function rejectUnknownCall(options: object, known: ReadonlySet<string>, method: string): void {
  for (const name in options) {
    if (known.has(name)) continue
    const expected = knownOption(name, known, CALL_OPTION_HINTS, quote, `${method}() takes no options`)
    throw new InputError(name, expected, (options as Record<string, unknown>)[name])
  }
}

/** The options a JavaScript caller gave a method that takes none: an error unless empty. */
export function noOptions(options: unknown, method: string): void {
  if (options === undefined) return
  if (typeof options !== 'object' || options === null) {
    throw new InputError('options', `omitted (${method}() takes no options)`, options)
  }
  rejectUnknownCall(options, NO_OPTIONS, method)
}
