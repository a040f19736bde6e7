/**
 * The options of `rateLimitTools`, checked once at the call: a bad value is a `ConfigError` naming the
 * option and the value, before any tool runs.
 * @module
 */

import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js'
import { ConfigError, type KeyInput, type RateLimiter } from '@tollgate/core'

/** What the SDK hands a tool handler besides its arguments: session, auth, request, signal. */
export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>

/** One tool call as the limiter sees it. */
export interface ToolCall {
  /** The tool's registered name. */
  readonly tool: string
  /** The arguments after the tool's input schema parsed them (undefined for a tool without one). */
  readonly args: unknown
  readonly extra: ToolExtra
}

/** Units a call spends: one number for every policy, or a number by policy name (others spend 1). */
export type Cost = number | Readonly<Record<string, number>>

/** A tool's cost: fixed, or computed from its parsed arguments. */
export type ToolCost = Cost | ((args: any, call: ToolCall) => Cost)

export interface RateLimitToolsOptions {
  /** The limiter every tool call consumes from (its policies are the budgets, its failure policy applies). */
  limiter: RateLimiter
  /**
   * The identity a call spends for. Default: the authenticated client (`authInfo.clientId`), else the
   * MCP session, else `'stdio'` for a local transport; a shared `'anonymous'` otherwise (warned once).
   */
  key?: (call: ToolCall) => KeyInput | Promise<KeyInput>
  /** Cost by tool name; tools not named cost 1 on every policy. */
  cost?: Readonly<Record<string, ToolCost>>
  /**
   * The actual cost, read once the tool returned: the spend becomes it (`limiter.settle`). Answer
   * `undefined` to keep the estimate.
   */
  settle?: (result: CallToolResult, call: ToolCall) => Cost | undefined | Promise<Cost | undefined>
  /** Give the spend back when the tool throws or returns `isError: true`. @default false */
  refundOnError?: boolean
  /** Calls for which this answers true are neither counted nor refused. */
  skip?: (call: ToolCall) => boolean | Promise<boolean>
  /** Tools left out entirely, by name. */
  exclude?: readonly string[]
}

const isFunction = (v: unknown): v is (...a: never[]) => unknown => typeof v === 'function'

function checkCost(value: unknown, option: string): void {
  if (isFunction(value)) return
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

/** Throws ConfigError on the first bad option. */
export function checkOptions(options: unknown): asserts options is RateLimitToolsOptions {
  if (typeof options !== 'object' || options === null)
    throw new ConfigError('options', 'an object', options, 'type')
  const o = options as Record<string, unknown>
  const limiter = o.limiter as { consume?: unknown } | undefined
  if (typeof limiter !== 'object' || limiter === null || !isFunction(limiter.consume))
    throw new ConfigError('limiter', 'a RateLimiter', o.limiter, 'type')
  for (const name of ['key', 'settle', 'skip'] as const) {
    if (o[name] !== undefined && !isFunction(o[name]))
      throw new ConfigError(name, 'a function', o[name], 'type')
  }
  if (o.refundOnError !== undefined && typeof o.refundOnError !== 'boolean')
    throw new ConfigError('refundOnError', 'a boolean', o.refundOnError, 'type')
  if (o.cost !== undefined) {
    if (typeof o.cost !== 'object' || o.cost === null || Array.isArray(o.cost))
      throw new ConfigError('cost', 'a record of costs by tool name', o.cost, 'type')
    for (const [tool, c] of Object.entries(o.cost)) checkCost(c, `cost.${tool}`)
  }
  if (o.exclude !== undefined) {
    if (!Array.isArray(o.exclude) || o.exclude.some((t) => typeof t !== 'string'))
      throw new ConfigError('exclude', 'an array of tool names', o.exclude, 'type')
  }
}
