/**
 * Error classes with stable codes. A denial is never an error: these are for misuse and outages.
 * See `docs/errors.md` for every code with its fix.
 * @module
 */

/** Stable error codes. Never renamed; new ones are only added. */
export type ErrorCode =
  | 'ERR_TOLLGATE_CONFIG'
  | 'ERR_TOLLGATE_INPUT'
  | 'ERR_TOLLGATE_STORE'
  | 'ERR_TOLLGATE_TIMEOUT'
  | 'ERR_TOLLGATE_RATE_LIMITED'
  | 'ERR_TOLLGATE_WAIT_TIMEOUT'

/**
 * The brand two builds of the package (its ESM and CommonJS files, or two installed copies) share: a
 * registered symbol, so `instanceof` recognises an error or a limiter from the other build. The version
 * changes only when what one build reads off another's objects changes.
 */
const BRAND = Symbol.for('tollgate.brand/1')

/**
 * Marks `cls` as the class `name` for {@link isBranded}. Only the classes marked here are recognised
 * across builds; a user's subclass keeps the ordinary `instanceof`.
 * @internal
 */
export function brand(cls: abstract new (...args: never[]) => unknown, name: string): void {
  Object.defineProperty(cls.prototype, BRAND, { value: name })
}

/**
 * `value instanceof cls`, or an object of the class with the same brand from another build of the
 * package. Installed as `Symbol.hasInstance` of the branded classes, so `instanceof` itself works across
 * builds, in Tollgate and in the application.
 * @internal
 */
export function isBranded(cls: abstract new (...args: never[]) => unknown, value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false
  if (Function.prototype[Symbol.hasInstance].call(cls, value)) return true
  const proto = cls.prototype as Record<symbol, unknown>
  if (!Object.hasOwn(proto, BRAND)) return false
  const name = proto[BRAND]
  for (let p = Object.getPrototypeOf(value); p !== null; p = Object.getPrototypeOf(p)) {
    if (Object.hasOwn(p, BRAND) && p[BRAND] === name) return true
  }
  return false
}

/** Base class of every error Tollgate throws. */
export class RateLimitError extends Error {
  static {
    brand(RateLimitError, 'RateLimitError')
  }
  /** Recognises the errors of every build and copy of the package (see {@link isBranded}). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass instanceof asks about
    return isBranded(this, value)
  }
  readonly code: ErrorCode
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** Longest description of a value in a message (values can come from a request, at any size). */
const MAX_DESCRIPTION = 100
/** Object keys a description lists before an ellipsis. */
const MAX_KEYS = 5

/**
 * A short, bounded description of a received value for a message: strings quoted, escaped and cut
 * with an ellipsis, objects by their class (`a RateLimiter`, `an object with keys a, b, c…`), arrays by
 * their length. Never more than about 100 characters, whatever the value.
 * @internal
 */
export function describe(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return quoted(value, MAX_DESCRIPTION)
    case 'number':
    case 'boolean':
    case 'undefined':
      return String(value)
    case 'bigint':
      return cut(`${value}n`, MAX_DESCRIPTION)
    case 'symbol':
      return cut(String(value), MAX_DESCRIPTION)
    case 'function':
      return 'a function'
  }
  if (value === null) return 'null'
  if (Array.isArray(value)) return `an array of ${value.length} item${value.length === 1 ? '' : 's'}`
  const name = className(value as object)
  if (name !== undefined && name !== 'Object') return cut(article(name), MAX_DESCRIPTION)
  let keys = ''
  let count = 0
  for (const key in value as object) {
    if (count === MAX_KEYS) {
      keys += '…'
      break
    }
    keys += `${count === 0 ? '' : ', '}${cut(key, 24)}`
    count++
  }
  return count === 0 ? 'an empty object' : cut(`an object with keys ${keys}`, MAX_DESCRIPTION)
}

/** The value's class name, read without calling any of its code (no getters, no toString). */
function className(value: object): string | undefined {
  let proto: unknown
  try {
    proto = Object.getPrototypeOf(value)
  } catch {
    return undefined // a revoked proxy
  }
  if (proto === null) return undefined
  const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value as { name?: unknown } | undefined
  const name = typeof ctor === 'function' ? Object.getOwnPropertyDescriptor(ctor, 'name')?.value : undefined
  return typeof name === 'string' && name !== '' ? name : undefined
}

function article(name: string): string {
  return `${/^[AEIOU]/i.test(name) ? 'an' : 'a'} ${name}`
}

/** `text` cut to `max` characters, the last one an ellipsis. */
function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}

/** A string as JSON, cut (between characters, never inside an escape) to at most `max` characters. */
function quoted(text: string, max: number): string {
  if (text.length <= max - 2) {
    const json = JSON.stringify(text)
    if (json.length <= max) return json
  }
  let out = '"'
  for (const ch of text) {
    const escaped = JSON.stringify(ch).slice(1, -1)
    if (out.length + escaped.length > max - 2) return `${out}…"`
    out += escaped
  }
  return `${out}"`
}

/**
 * A bad option, thrown synchronously at construction before any Redis command. Names the option and
 * the value received. `instanceof TypeError`-style checks still work through `kind`.
 *
 * @example
 * new RateLimiter({ store, limit: 0, window: '1m' })
 * // ConfigError: limit must be a positive safe integer, received 0
 */
export class ConfigError extends RateLimitError {
  static {
    brand(ConfigError, 'ConfigError')
  }
  /** The option path, e.g. `policies.ip.window`. */
  readonly option: string
  readonly received: unknown
  /** `'type'` when the value has the wrong type, `'range'` when it is out of bounds. */
  readonly kind: 'type' | 'range'
  constructor(option: string, expected: string, received: unknown, kind: 'type' | 'range' = 'range') {
    super(
      'ERR_TOLLGATE_CONFIG',
      `${cut(option, MAX_DESCRIPTION)} must be ${expected}, received ${describe(received)}`,
    )
    this.option = option
    this.received = received
    this.kind = kind
  }
}

/**
 * A bad per-call input (empty key, cost NaN/negative/fractional), thrown before any Redis command so
 * that nothing a client sends can reach a store error path (which might fail open).
 */
export class InputError extends RateLimitError {
  static {
    brand(InputError, 'InputError')
  }
  readonly argument: string
  readonly received: unknown
  constructor(argument: string, expected: string, received: unknown) {
    super(
      'ERR_TOLLGATE_INPUT',
      `${cut(argument, MAX_DESCRIPTION)} must be ${expected}, received ${describe(received)}`,
    )
    this.argument = argument
    this.received = received
  }
}

/** The store failed (connection, script error, out of memory). The failure policy decides what happens. */
export class StoreError extends RateLimitError {
  static {
    brand(StoreError, 'StoreError')
  }
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_TOLLGATE_STORE', message, options)
  }
}

/** A store call passed its deadline. Its outcome is unknown, so it is never retried. */
export class StoreTimeoutError extends RateLimitError {
  static {
    brand(StoreTimeoutError, 'StoreTimeoutError')
  }
  readonly timeoutMs: number
  constructor(timeoutMs: number) {
    super('ERR_TOLLGATE_TIMEOUT', `store call exceeded its ${timeoutMs} ms deadline`)
    this.timeoutMs = timeoutMs
  }
}

/** Thrown by `attempt()` when the call is refused, carrying the decision. */
export class RateLimitedError extends RateLimitError {
  static {
    brand(RateLimitedError, 'RateLimitedError')
  }
  readonly decision: import('./types').Decision
  constructor(decision: import('./types').Decision) {
    super(
      'ERR_TOLLGATE_RATE_LIMITED',
      Number.isFinite(decision.retryAfterMs)
        ? `rate limited: retry in ${decision.retryAfterMs} ms`
        : 'rate limited: the cost exceeds what the policy can ever grant',
    )
    this.decision = decision
  }
}

/** Thrown by `wait()` when the wait would exceed `maxWaitMs`. */
export class RateLimitTimeoutError extends RateLimitError {
  static {
    brand(RateLimitTimeoutError, 'RateLimitTimeoutError')
  }
  readonly decision: import('./types').Decision
  constructor(decision: import('./types').Decision, maxWaitMs: number) {
    super(
      'ERR_TOLLGATE_WAIT_TIMEOUT',
      `waiting ${decision.retryAfterMs} ms would exceed maxWaitMs (${maxWaitMs} ms)`,
    )
    this.decision = decision
  }
}
