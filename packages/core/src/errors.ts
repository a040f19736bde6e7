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

/** Base class of every error Tollgate throws. */
export class RateLimitError extends Error {
  readonly code: ErrorCode
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) {
    return String(value)
  }
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'function') return 'a function'
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return Object.prototype.toString.call(value)
  }
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
  /** The option path, e.g. `policies.ip.window`. */
  readonly option: string
  readonly received: unknown
  /** `'type'` when the value has the wrong type, `'range'` when it is out of bounds. */
  readonly kind: 'type' | 'range'
  constructor(option: string, expected: string, received: unknown, kind: 'type' | 'range' = 'range') {
    super('ERR_TOLLGATE_CONFIG', `${option} must be ${expected}, received ${describe(received)}`)
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
  readonly argument: string
  readonly received: unknown
  constructor(argument: string, expected: string, received: unknown) {
    super('ERR_TOLLGATE_INPUT', `${argument} must be ${expected}, received ${describe(received)}`)
    this.argument = argument
    this.received = received
  }
}

/** The store failed (connection, script error, out of memory). The failure policy decides what happens. */
export class StoreError extends RateLimitError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_TOLLGATE_STORE', message, options)
  }
}

/** A store call passed its deadline. Its outcome is unknown, so it is never retried. */
export class StoreTimeoutError extends RateLimitError {
  readonly timeoutMs: number
  constructor(timeoutMs: number) {
    super('ERR_TOLLGATE_TIMEOUT', `store call exceeded its ${timeoutMs} ms deadline`)
    this.timeoutMs = timeoutMs
  }
}

/** Thrown by `attempt()` when the call is refused, carrying the decision. */
export class RateLimitedError extends RateLimitError {
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
  readonly decision: import('./types').Decision
  constructor(decision: import('./types').Decision, maxWaitMs: number) {
    super(
      'ERR_TOLLGATE_WAIT_TIMEOUT',
      `waiting ${decision.retryAfterMs} ms would exceed maxWaitMs (${maxWaitMs} ms)`,
    )
    this.decision = decision
  }
}
