import path from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { META_KEY, type RateLimitedMeta } from '@tollgate/mcp'
import { clearOfBoundary, defined, redisUrl } from '@tollgate/testkit'

describe('example: an MCP server with call and token budgets', () => {
  it('summaries settle to the tokens used, the 61st call in a minute is refused with its retry time', async () => {
    await clearOfBoundary(86_400_000, 30_000) // the daily token window
    const client = new Client({ name: 'example-test', version: '1.0.0' })
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ['--import', 'tsx', path.join(__dirname, 'index.ts')],
        cwd: __dirname,
        env: {
          ...(process.env as Record<string, string>),
          REDIS_URL: redisUrl(),
          TOLLGATE_PREFIX: `example-mcp-${process.pid}-${Date.now()}`,
        },
        stderr: 'pipe',
      }),
    )
    try {
      const call = (name: string, args: Record<string, unknown>) =>
        client.callTool({ name, arguments: args }) as Promise<CallToolResult>
      // 15 summaries reserving 100,000 tokens each: without settling, the 11th would not fit the day
      for (let i = 0; i < 15; i++) {
        const r = await call('summarize', { text: 'x'.repeat(400), maxTokens: 100_000 })
        expect({ i, isError: r.isError ?? false, tokens: r._meta?.tokens }).toEqual({
          i,
          isError: false,
          tokens: 100,
        })
      }
      const searches = await Promise.all(Array.from({ length: 46 }, () => call('search', { query: 'redis' })))
      expect(searches.filter((r) => !r.isError)).toHaveLength(45)
      const refused = defined(
        searches.find((r) => r.isError),
        'a refused search',
      )
      const meta = refused._meta?.[META_KEY] as RateLimitedMeta
      expect(meta).toMatchObject({
        code: 'rate_limited',
        tool: 'search',
        policies: [{ policy: 'calls', limit: 60 }],
      })
      expect(meta.retryAfterMs).toBeGreaterThan(0)
      expect(meta.retryAfterMs).toBeLessThanOrEqual(60_000)
      expect((refused.content[0] as { text: string }).text).toMatch(
        /^Rate limited: tool 'search' refused by calls/,
      )
    } finally {
      await client.close()
    }
  }, 120_000)
})
