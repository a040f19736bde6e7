/**
 * `rateLimitTools(server, options)`: every tool of an McpServer, registered before or after the call,
 * spends from the limiter before it runs; a refusal is a tool error result with the retry time, and the
 * actual cost is settled once the tool returned.
 * @module
 */

import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { Decision, KeyInput } from '@tollgate/core'
import { type Cost, checkOptions, type RateLimitToolsOptions, type ToolCall, type ToolExtra } from './options'
import { refusalResult } from './refusal'

type Handler = (...params: unknown[]) => unknown
interface ToolEntry {
  handler: Handler | object
  update: (updates: { name?: string | null; callback?: unknown }) => void
}

let warnedAnonymous = false

/** The default identity: who authenticated, else the session, else the one local client. */
function defaultKey(call: ToolCall): KeyInput {
  const { authInfo, sessionId, requestInfo } = call.extra
  if (authInfo?.clientId) return `client:${authInfo.clientId}`
  if (sessionId) return `session:${sessionId}`
  // stdio and in-process transports serve one client per server; HTTP without sessions or auth does not
  if (!requestInfo) return 'stdio'
  if (!warnedAnonymous) {
    warnedAnonymous = true
    console.warn(
      '@tollgate/mcp: a tool call over HTTP has neither authInfo nor a session id; every such client ' +
        "shares the 'anonymous' budget. Pass `key` to choose the identity.",
    )
  }
  return 'anonymous'
}

function wrapper(options: RateLimitToolsOptions, name: () => string, handler: Handler): Handler {
  const { limiter } = options
  const key = options.key ?? defaultKey
  return async (...params: unknown[]) => {
    const extra = params[params.length - 1] as ToolExtra
    const call: ToolCall = { tool: name(), args: params.length > 1 ? params[0] : undefined, extra }
    if (options.exclude?.includes(call.tool) || (options.skip && (await options.skip(call)))) {
      return handler(...params)
    }
    // own keys only: a tool named after an Object.prototype member must not find it as its cost
    const priced =
      options.cost && Object.hasOwn(options.cost, call.tool) ? options.cost[call.tool] : undefined
    const cost: Cost = typeof priced === 'function' ? priced(call.args, call) : (priced ?? 1)
    const decision: Decision = await limiter.consume(await key(call), { cost })
    if (!decision.allowed) return refusalResult(call.tool, decision)
    let result: CallToolResult
    try {
      result = (await handler(...params)) as CallToolResult
    } catch (error) {
      if (options.refundOnError) await limiter.refund(decision).catch(() => {})
      throw error
    }
    if (result?.isError && options.refundOnError) {
      await limiter.refund(decision).catch(() => {})
    } else if (options.settle) {
      const actual = await options.settle(result, call)
      // the tool ran: a failed settle must not lose its result
      if (actual !== undefined) await limiter.settle(decision, actual).catch(() => {})
    }
    return result
  }
}

/** Wraps one registered tool's handler, and any handler `update({ callback })` gives it later. */
function guard(options: RateLimitToolsOptions, name: string, tool: ToolEntry): void {
  let current = name
  const wrap = (cb: unknown) =>
    typeof cb === 'function' ? wrapper(options, () => current, cb as Handler) : cb // task tools pass as they are
  tool.handler = wrap(tool.handler) as Handler
  const update = tool.update.bind(tool)
  tool.update = (updates) => {
    if (typeof updates.name === 'string') current = updates.name
    update(updates.callback === undefined ? updates : { ...updates, callback: wrap(updates.callback) })
  }
}

/**
 * Limits every tool call on `server`: tools registered already and every tool registered after. Throws
 * ConfigError on a bad option.
 *
 * @example
 * rateLimitTools(server, {
 *   limiter: new RateLimiter({ store, policies: { calls: { limit: 60, window: '1m' }, tokens: { limit: 1_000_000, window: '1d' } } }),
 *   cost: { summarize: (args) => ({ tokens: args.maxTokens }) },
 *   settle: (result) => ({ tokens: Number(result._meta?.tokens ?? 0) }),
 * })
 */
export function rateLimitTools(server: McpServer, options: RateLimitToolsOptions): void {
  checkOptions(options)
  const registry = (server as unknown as { _registeredTools?: Record<string, ToolEntry> })._registeredTools
  if (typeof server?.registerTool !== 'function' || typeof registry !== 'object' || registry === null) {
    throw new TypeError('rateLimitTools: server must be an McpServer from @modelcontextprotocol/sdk')
  }
  for (const [name, tool] of Object.entries(registry)) guard(options, name, tool)
  const registerTool = server.registerTool.bind(server)
  const tool = server.tool.bind(server) as (...a: unknown[]) => ToolEntry
  server.registerTool = ((name: string, config: unknown, cb: unknown) => {
    const registered = (registerTool as (...a: unknown[]) => ToolEntry)(name, config, cb)
    guard(options, name, registered)
    return registered
  }) as McpServer['registerTool']
  server.tool = ((name: string, ...rest: unknown[]) => {
    const registered = tool(name, ...rest)
    guard(options, name, registered)
    return registered
  }) as McpServer['tool']
}
