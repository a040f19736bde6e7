/**
 * The research server: `search` costs one call, `summarize` one call and up to `maxTokens` tokens,
 * settled to the tokens it really used. Budgets per client: 60 calls a minute, 1,000,000 tokens a day.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { RateLimiter, type Store } from '@tollgate/core'
import { rateLimitTools } from '@tollgate/mcp'
import { z } from 'zod'

export function budgets(store: Store, prefix = 'mcp'): RateLimiter {
  return new RateLimiter({
    store,
    prefix,
    policies: {
      // a log: exact in every minute, not only in clock-aligned ones
      calls: { limit: 60, window: '1m', algorithm: 'sliding-log' },
      // a daily quota, renewed at midnight UTC
      tokens: { limit: 1_000_000, window: '1d', algorithm: 'fixed-window' },
    },
  })
}

// Stands in for a model call: the tokens a summary of `text` really takes.
const tokensOf = (text: string) => Math.ceil(text.length / 4)

export function researchServer(limiter: RateLimiter): McpServer {
  const server = new McpServer({ name: 'research', version: '1.0.0' })
  rateLimitTools(server, {
    limiter,
    // search spends one call (tokens 0); summarize reserves its worst case before it runs
    cost: {
      search: { calls: 1, tokens: 0 },
      summarize: (args: { maxTokens: number }) => ({ calls: 1, tokens: args.maxTokens }),
    },
    // then pays what it used: the reserve above is given back but for this
    settle: (result, { tool }) =>
      tool === 'summarize' ? { tokens: Number(result._meta?.tokens ?? 0) } : undefined,
  })
  server.registerTool(
    'search',
    { description: 'Search the archive', inputSchema: { query: z.string() } },
    async ({ query }) => ({ content: [{ type: 'text', text: `3 documents match "${query}"` }] }),
  )
  server.registerTool(
    'summarize',
    {
      description: 'Summarize a text in at most maxTokens tokens',
      inputSchema: { text: z.string(), maxTokens: z.number().int().positive().max(100_000) },
    },
    async ({ text, maxTokens }) => {
      const used = Math.min(maxTokens, tokensOf(text))
      return { content: [{ type: 'text', text: text.slice(0, used * 4) }], _meta: { tokens: used } }
    },
  )
  return server
}
