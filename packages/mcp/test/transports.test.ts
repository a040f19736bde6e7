/**
 * rateLimitTools over the SDK's real transports: stdio (the server a child process, as an agent host runs
 * it) and streamable HTTP (a node:http server, one McpServer per session), with the SDK's Client,
 * against the suite's redis-server. Budgets are sliding logs of an hour: no window boundary matters.
 */
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { META_KEY, type RateLimitedMeta, rateLimitTools } from '@tollgate/mcp'
import { redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'
import { toolServer } from './fixtures/tools'

const STDIO_SERVER = path.join(__dirname, 'fixtures', 'stdio-server.ts')
let n = 0
const prefix = () => `mcp-t-${process.pid}-${Date.now().toString(36)}-${++n}`
const echo = (client: Client, text = 'hi') =>
  client.callTool({ name: 'echo', arguments: { text } }) as Promise<CallToolResult>
const meta = (r: CallToolResult) => r._meta?.[META_KEY] as RateLimitedMeta | undefined

describe('over stdio', () => {
  const stdioClient = async (PREFIX: string) => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', STDIO_SERVER],
      env: { ...(process.env as Record<string, string>), REDIS_URL: redisUrl(), PREFIX },
      stderr: 'pipe',
    })
    const client = new Client({ name: 'stdio-agent', version: '1.0.0' })
    await client.connect(transport)
    return client
  }

  it('a server process admits its limit of 3 of 5 concurrent calls; a restarted one keeps the spend', async () => {
    const PREFIX = prefix()
    const first = await stdioClient(PREFIX)
    try {
      const results = await Promise.all(Array.from({ length: 5 }, (_, i) => echo(first, `${i}`)))
      expect(results.filter((r) => !r.isError)).toHaveLength(3)
      const refused = results.filter((r) => r.isError)
      expect(refused).toHaveLength(2)
      for (const r of refused) {
        expect(meta(r)).toMatchObject({ code: 'rate_limited', tool: 'echo' })
        expect(meta(r)!.retryAfterMs).toBeGreaterThan(0)
        expect((r.content[0] as { text: string }).text).toMatch(/^Rate limited: .* Retry after \d+ s/)
      }
      // the connection stays up after refusals
      expect(await first.listTools()).toMatchObject({ tools: expect.any(Array) })
    } finally {
      await first.close()
    }
    // the budget lives in Redis, not in the process
    const second = await stdioClient(PREFIX)
    try {
      expect((await echo(second)).isError).toBe(true)
    } finally {
      await second.close()
    }
  }, 60_000)
})

describe('over streamable HTTP', () => {
  let redis: ReturnType<typeof createClient>
  let http: Server
  let url: URL
  let limiter: RateLimiter
  const transports = new Map<string, StreamableHTTPServerTransport>()

  beforeAll(async () => {
    redis = createClient({ url: redisUrl() })
    redis.on('error', () => undefined)
    await redis.connect()
    limiter = new RateLimiter({
      store: new RedisStore(redis),
      prefix: prefix(),
      limit: 2,
      window: '1h',
      algorithm: 'sliding-log',
    })
    // a stand-in for the SDK's bearer-auth middleware: a verified token names its client
    const authenticate = (req: IncomingMessage & { auth?: AuthInfo }) => {
      const client = req.headers['x-test-client']
      if (typeof client === 'string') req.auth = { token: client, clientId: client, scopes: [] }
    }
    http = createServer(async (req, res) => {
      authenticate(req)
      const id = req.headers['mcp-session-id']
      let transport = typeof id === 'string' ? transports.get(id) : undefined
      if (!transport) {
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sid) => {
            transports.set(sid, created)
          },
        })
        const server = toolServer()
        rateLimitTools(server, { limiter })
        await server.connect(created)
        transport = created
      }
      await transport.handleRequest(req, res)
    })
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    url = new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`)
  })

  afterAll(async () => {
    await Promise.all([...transports.values()].map((t) => t.close()))
    await new Promise((resolve) => http.close(resolve))
    await redis.quit()
  })

  const httpClient = async (clientId?: string) => {
    const headers: Record<string, string> = clientId ? { 'x-test-client': clientId } : {}
    const client = new Client({ name: 'http-agent', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }))
    return client
  }

  it('each session spends its own budget: 2 of 4 concurrent calls per session', async () => {
    const sessions = await Promise.all([httpClient(), httpClient()])
    try {
      const results = await Promise.all(sessions.map((c) => Promise.all([1, 2, 3, 4].map(() => echo(c)))))
      for (const perSession of results) {
        expect(perSession.filter((r) => !r.isError)).toHaveLength(2)
        expect(perSession.filter((r) => meta(r)?.code === 'rate_limited')).toHaveLength(2)
      }
    } finally {
      await Promise.all(sessions.map((c) => c.close()))
    }
  }, 30_000)

  it('an authenticated client spends one budget across its sessions: new sessions do not reset it', async () => {
    const sessions = await Promise.all([httpClient('acme'), httpClient('acme'), httpClient('acme')])
    try {
      const results = await Promise.all(sessions.map((c) => echo(c)))
      expect(results.filter((r) => !r.isError)).toHaveLength(2)
      expect((await limiter.peek('client:acme', { cost: 0 })).remaining).toBe(0)
      const other = await httpClient('globex')
      expect((await echo(other)).isError).toBeFalsy()
      await other.close()
    } finally {
      await Promise.all(sessions.map((c) => c.close()))
    }
  }, 30_000)
})

describe('over stateless streamable HTTP, without auth', () => {
  it("every client shares the 'anonymous' budget, and the server warns once", async () => {
    const redis = createClient({ url: redisUrl() })
    redis.on('error', () => undefined)
    await redis.connect()
    const limiter = new RateLimiter({
      store: new RedisStore(redis),
      prefix: prefix(),
      limit: 3,
      window: '1h',
      algorithm: 'sliding-log',
    })
    // stateless: a server and a transport per request, no session ids
    const http = createServer(async (req, res) => {
      const server = toolServer()
      rateLimitTools(server, { limiter })
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
      res.on('close', () => {
        void transport.close()
        void server.close()
      })
      await server.connect(transport)
      await transport.handleRequest(req, res)
    })
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    const url = new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`)
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {})
    const clients: Client[] = []
    try {
      for (let i = 0; i < 2; i++) {
        const client = new Client({ name: `agent-${i}`, version: '1.0.0' })
        await client.connect(new StreamableHTTPClientTransport(url))
        clients.push(client)
      }
      const results = await Promise.all([...clients, ...clients].map((c) => echo(c)))
      expect(results.filter((r) => !r.isError)).toHaveLength(3)
      expect((await limiter.peek('anonymous', { cost: 0 })).remaining).toBe(0)
      expect(warn.mock.calls.filter(([m]) => String(m).includes("'anonymous'"))).toHaveLength(1)
    } finally {
      warn.mockRestore()
      await Promise.all(clients.map((c) => c.close()))
      await new Promise((resolve) => http.close(resolve))
      await redis.quit()
    }
  }, 30_000)
})
