/**
 * The options every integration shares, checked once at construction: a bad value is a `ConfigError`
 * naming the option and the value.
 * @module
 */
import { ConfigError, type RateLimiter } from '@tollgate/core'

/** Units a message spends: one number for every policy, or a number by policy name (others spend 1). */
export type Cost = number | Readonly<Record<string, number>>

/** One connection as the limits see it. */
export interface ConnectionInfo {
  /** The identity its connections and messages count against. */
  readonly identity: string
  /** Unique to this connection: the key of the `perConnection` message policies. */
  readonly connectionId: string
}

export interface GateOptions {
  /**
   * Connections per identity: a limiter whose policies are all concurrency policies (`{ concurrency,
   * lease }`). A connection holds one lease from open to close; the lease is renewed while it lives.
   */
  connections?: RateLimiter
  /** Messages: an ordinary limiter, one consume per message. */
  messages?: RateLimiter
  /** Names of `messages` policies counted per connection; the others count per identity. */
  perConnection?: readonly string[]
  /** Units a message costs: a number, a record by policy name, or computed from the message. @default 1 */
  cost?: Cost | ((data: unknown, connection: ConnectionInfo) => Cost)
}

const isFunction = (v: unknown): v is (...a: never[]) => unknown => typeof v === 'function'
const isLimiter = (v: unknown): v is RateLimiter =>
  typeof v === 'object' && v !== null && isFunction((v as { consume?: unknown }).consume)

function checkCost(value: unknown, option: string): void {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0)
      throw new ConfigError(option, 'a non-negative safe integer', value)
    return
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfigError(option, 'a number, a record by policy name or a function', value, 'type')
  for (const [name, n] of Object.entries(value)) {
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
      throw new ConfigError(`${option}.${name}`, 'a non-negative safe integer', n)
  }
}

/** Throws ConfigError on the first bad option; `functions` are the integration's own callback options. */
export function checkGateOptions(
  options: unknown,
  functions: readonly string[],
): asserts options is GateOptions {
  if (typeof options !== 'object' || options === null)
    throw new ConfigError('options', 'an object', options, 'type')
  const o = options as Record<string, unknown>
  if (o.connections === undefined && o.messages === undefined)
    throw new ConfigError('connections', 'a RateLimiter (or pass messages)', o.connections, 'type')
  for (const name of ['connections', 'messages'] as const) {
    if (o[name] !== undefined && !isLimiter(o[name]))
      throw new ConfigError(name, 'a RateLimiter', o[name], 'type')
  }
  const connections = o.connections as RateLimiter | undefined
  const rate = connections?.policies.find((p) => p.algorithm !== 'concurrency')
  if (rate)
    throw new ConfigError(
      `connections.policies.${rate.name}`,
      'a concurrency policy ({ concurrency, lease }): a connection holds its lease while open',
      rate.algorithm,
    )
  for (const name of functions) {
    if (o[name] !== undefined && !isFunction(o[name]))
      throw new ConfigError(name, 'a function', o[name], 'type')
  }
  if (o.perConnection !== undefined) {
    const names = new Set((o.messages as RateLimiter | undefined)?.policies.map((p) => p.name) ?? [])
    if (!Array.isArray(o.perConnection))
      throw new ConfigError('perConnection', 'an array of policy names of messages', o.perConnection, 'type')
    for (const n of o.perConnection) {
      if (!names.has(n)) throw new ConfigError('perConnection', 'policy names of the messages limiter', n)
    }
  }
  if (o.cost !== undefined && !isFunction(o.cost)) checkCost(o.cost, 'cost')
}
