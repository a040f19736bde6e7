/**
 * `@tollgate/mcp`: rate limits for the tool calls of MCP servers built on `@modelcontextprotocol/sdk`.
 * @module
 */
export type { Cost, RateLimitToolsOptions, ToolCall, ToolCost, ToolExtra } from './options'
export { rateLimitTools } from './rate-limit-tools'
export { META_KEY, type RateLimitedMeta, refusalResult } from './refusal'
