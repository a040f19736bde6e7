/**
 * The research server over stdio, as an agent host (Claude Desktop, an IDE, the MCP inspector) starts it.
 * `REDIS_URL` (default redis://127.0.0.1:6379) holds the budgets. stdout is the protocol: logs go to stderr.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { budgets, researchServer } from './server'

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }).on('error', (err) =>
  console.error('redis:', err.message),
)
redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
const server = researchServer(budgets(new RedisStore(redis), process.env.TOLLGATE_PREFIX))
await server.connect(new StdioServerTransport())
console.error('research MCP server on stdio')
process.stdin.on('close', () => {
  void redis.quit().finally(() => process.exit(0))
})
