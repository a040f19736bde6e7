/**
 * rateLimitTools with the SDK's own Client and McpServer over the in-process linked transport, against
 * the suite's redis-server. Every budget is a sliding log or a day-long window far from its end, so no
 * window boundary falls inside a test.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { ConfigError, RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { META_KEY, type RateLimitedMeta, type RateLimitToolsOptions, rateLimitTools } from '@tollgate/mcp'
import { redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'
import { z } from 'zod'
import { toolServer } from '../test/fixtures/tools'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const prefix = () => `mcp-${process.pid}-${Date.now().toString(36)}-${++n}`
const limiter = (options: Partial<RateLimiterOptions> = {}) =>
  new RateLimiter(
    (options.policies
      ? { store, prefix: prefix(), ...options }
      : {
          store,
          prefix: prefix(),
          limit: 5,
          window: '1h',
          algorithm: 'sliding-log',
          ...options,
        }) as RateLimiterOptions,
  )

beforeAll(async () => {
  redis = createClient({ url: redisUrl() })
  redis.on('error', () => undefined)
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis.quit()
})

const open: Client[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()))
})

async function connect(server: McpServer): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  const client = new Client({ name: 'test-agent', version: '1.0.0' })
  await Promise.all([server.connect(serverSide), client.connect(clientSide)])
  open.push(client)
  return client
}

async function limited(options: RateLimitToolsOptions): Promise<Client> {
  const server = toolServer()
  rateLimitTools(server, options)
  return connect(server)
}

const call = (client: Client, name: string, args: Record<string, unknown> = {}) =>
  client.callTool({ name, arguments: args }) as Promise<CallToolResult>
const meta = (r: CallToolResult) => r._meta?.[META_KEY] as RateLimitedMeta | undefined
const text = (r: CallToolResult) => (r.content[0] as { text: string }).text

describe('rateLimitTools', () => {
  it('20 concurrent calls against a limit of 5: exactly 5 run, 15 get a tool error with the retry time', async () => {
    const client = await limited({ limiter: limiter() })
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call(client, 'echo', { text: `${i}` })),
    )
    const ran = results.filter((r) => !r.isError)
    const refused = results.filter((r) => r.isError)
    expect(ran).toHaveLength(5)
    expect(refused).toHaveLength(15)
    for (const r of refused) {
      const m = meta(r)!
      expect(m).toMatchObject({
        code: 'rate_limited',
        tool: 'echo',
        policies: [{ policy: 'default', limit: 5 }],
      })
      expect(m.retryAfterMs).toBeGreaterThan(0)
      expect(m.retryAfterSeconds).toBe(Math.ceil(m.retryAfterMs! / 1000))
      expect(text(r)).toBe(
        `Rate limited: tool 'echo' refused by default (5 per 3600 s). Retry after ${m.retryAfterSeconds} s (${m.retryAfterMs} ms).`,
      )
    }
    // a refusal is a result, not a dropped session: the connection still answers, every tool shares the budget
    expect(meta(await call(client, 'ping'))?.tool).toBe('ping')
    expect(await client.ping()).toEqual({})
  })

  it('two budgets at once: calls per hour and tokens per day, the tokens settled to the actual use', async () => {
    const l = limiter({
      policies: {
        calls: { limit: 60, window: '1h', algorithm: 'sliding-log' },
        tokens: { limit: 1000, window: '1d', algorithm: 'gcra' },
      },
    })
    const client = await limited({
      limiter: l,
      // admitted on the estimate: the most it may use
      cost: { summarize: (args: { maxTokens: number }) => ({ calls: 1, tokens: args.maxTokens }) },
      settle: (result, { tool }) =>
        tool === 'summarize'
          ? { tokens: (result._meta as { usage: { tokens: number } }).usage.tokens }
          : undefined,
    })
    expect((await call(client, 'summarize', { maxTokens: 600, used: 100 })).isError).toBeFalsy()
    const after = await l.peek('stdio', { cost: 0 })
    expect(after.policies.map((p) => [p.policy, p.remaining])).toEqual([
      ['calls', 59],
      ['tokens', 900], // 600 reserved, 100 used
    ])
    // 950 does not fit what is left: refused by tokens alone, nothing charged
    const refused = await call(client, 'summarize', { maxTokens: 950, used: 10 })
    expect(refused.isError).toBe(true)
    expect(meta(refused)!.policies.map((p) => p.policy)).toEqual(['tokens'])
    expect(text(refused)).toMatch(/refused by tokens \(1000 per 86400 s\)/)
    // other tools cost 1 on every policy
    expect((await call(client, 'echo', { text: 'x' })).isError).toBeFalsy()
    const last = await l.peek('stdio', { cost: 0 })
    expect(last.policies.map((p) => p.remaining)).toEqual([58, 899])
  })

  it('a cost the budget can never grant is refused with no retry time', async () => {
    const client = await limited({ limiter: limiter(), cost: { echo: 6 } })
    const r = await call(client, 'echo', { text: 'x' })
    expect(meta(r)).toMatchObject({ retryAfterMs: null, retryAfterSeconds: null })
    expect(text(r)).toMatch(/costs more than the budget can ever grant: do not retry/)
  })

  it('a key function picks the identity: each user spends their own budget', async () => {
    const l = limiter({ limit: 2 })
    const server = toolServer()
    rateLimitTools(server, {
      limiter: l,
      key: ({ args }) => `user:${(args as { text?: string })?.text ?? ''}`,
    })
    const client = await connect(server)
    const results = await Promise.all(
      ['a', 'a', 'a', 'b', 'b', 'b'].map((text) => call(client, 'echo', { text })),
    )
    expect(results.map((r) => !r.isError)).toEqual(expect.arrayContaining([true, true, true, true]))
    expect(results.filter((r) => r.isError)).toHaveLength(2)
    expect((await l.peek('user:a', { cost: 0 })).remaining).toBe(0)
    expect((await l.peek('user:b', { cost: 0 })).remaining).toBe(0)
  })

  it('limits tools registered before and after it, and a handler replaced by update()', async () => {
    const server = toolServer() // echo, ping, ... already registered
    rateLimitTools(server, { limiter: limiter({ limit: 3 }) })
    const late = server.registerTool('late', { inputSchema: { n: z.number() } }, async ({ n }) => ({
      content: [{ type: 'text', text: String(n) }],
    }))
    server.tool('legacy', async () => ({ content: [{ type: 'text', text: 'old api' }] }))
    const client = await connect(server)
    expect((await call(client, 'ping')).isError).toBeFalsy()
    expect((await call(client, 'late', { n: 1 })).isError).toBeFalsy()
    late.update({ callback: async () => ({ content: [{ type: 'text', text: 'new' }] }) })
    expect(text(await call(client, 'late', { n: 2 }))).toBe('new')
    expect(meta(await call(client, 'legacy'))?.code).toBe('rate_limited')
  })

  it('skip and exclude leave calls uncounted; bad arguments are refused before the limiter', async () => {
    const l = limiter({ limit: 1 })
    const client = await limited({
      limiter: l,
      exclude: ['ping'],
      skip: ({ args }) => (args as { text?: string })?.text === 'free',
    })
    for (let i = 0; i < 3; i++) expect((await call(client, 'ping')).isError).toBeFalsy()
    for (let i = 0; i < 3; i++) expect((await call(client, 'echo', { text: 'free' })).isError).toBeFalsy()
    expect((await call(client, 'echo', { text: 42 })).isError).toBe(true) // the schema refuses it
    expect((await l.peek('stdio', { cost: 0 })).remaining).toBe(1)
  })

  it('refundOnError gives the spend back when the tool throws; without it the call counts', async () => {
    const kept = limiter({ limit: 2 })
    const a = await limited({ limiter: kept })
    expect(text(await call(a, 'fail'))).toBe('upstream broke')
    expect((await kept.peek('stdio', { cost: 0 })).remaining).toBe(1)
    const refunded = limiter({ limit: 2 })
    const b = await limited({ limiter: refunded, refundOnError: true })
    for (let i = 0; i < 3; i++) expect(text(await call(b, 'fail'))).toBe('upstream broke')
    expect((await refunded.peek('stdio', { cost: 0 })).remaining).toBe(2)
  })

  it("the limiter's failure policy: 'deny' answers a refusal result, 'allow' runs the tool", async () => {
    const dead = createClient({ url: redisUrl() }).on('error', () => {})
    await dead.connect()
    await dead.quit()
    const down = (onStoreError: 'allow' | 'deny') =>
      new RateLimiter({ store: new RedisStore(dead), prefix: prefix(), limit: 5, window: '1h', onStoreError })
    const denied = await call(await limited({ limiter: down('deny') }), 'echo', { text: 'x' })
    expect(denied.isError).toBe(true)
    expect(meta(denied)).toMatchObject({ code: 'unavailable', tool: 'echo', policies: [] })
    expect(meta(denied)!.retryAfterMs).toBeGreaterThanOrEqual(1000)
    expect(text(denied)).toMatch(
      /^Rate limited: tool 'echo' refused: the rate limiter is unavailable\. Retry after \d+ s \(\d+ ms\)\.$/,
    )
    const allowed = await call(await limited({ limiter: down('allow') }), 'echo', { text: 'x' })
    expect(allowed).toMatchObject({ content: [{ type: 'text', text: 'x' }] })
  })
})

describe('rateLimitTools options', () => {
  const bad: [string, unknown, string][] = [
    ['no limiter', { limiter: undefined }, 'limiter'],
    ['limiter not a limiter', { limiter: {} }, 'limiter'],
    ['key not a function', { key: 'session' }, 'key'],
    ['settle not a function', { settle: 3 }, 'settle'],
    ['cost not a record', { cost: 3 }, 'cost'],
    ['a negative cost', { cost: { echo: -1 } }, 'cost.echo'],
    ['a fractional cost by policy', { cost: { echo: { tokens: 1.5 } } }, 'cost.echo.tokens'],
    ['refundOnError not a boolean', { refundOnError: 'yes' }, 'refundOnError'],
    ['exclude not names', { exclude: [1] }, 'exclude'],
  ]
  it.each(bad)('%s: ConfigError naming the option', (_name, options, option) => {
    const opts = { limiter: limiter(), ...(options as object) }
    let thrown: unknown
    try {
      rateLimitTools(toolServer(), opts as RateLimitToolsOptions)
    } catch (e) {
      thrown = e
    }
    expect(thrown).toBeInstanceOf(ConfigError)
    expect((thrown as ConfigError).option).toBe(option)
  })

  it('rejects what is not an McpServer', () => {
    expect(() => rateLimitTools({} as McpServer, { limiter: limiter() })).toThrow(/McpServer/)
  })
})
