/**
 * The example against a local server that limits like an LLM provider (its own counters and
 * x-ratelimit-* headers) and the test Redis: two replicas share one budget, follow the provider when
 * it allows less than configured, settle tokens from `usage`; and index.ts runs as its own process.
 * Minute-long fixed windows, kept clear of their boundary; nothing asserts on timings.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { RateLimitTimeoutError, RedisStore } from '@tollgate/core'
import { clearOfBoundary, type LlmUpstream, redisUrl, startLlmUpstream } from '@tollgate/testkit'
import { createClient } from 'redis'
import { chatClient } from './chat-client'

type Client = ReturnType<typeof createClient>
const clients: Client[] = []
let upstream: LlmUpstream | undefined

async function replica(prefix: string, url: string) {
  const redis: Client = createClient({ url: redisUrl() })
  redis.on('error', () => {})
  await redis.connect()
  clients.push(redis)
  return chatClient(new RedisStore(redis), {
    upstream: url,
    apiKey: 'sk-test-000001',
    prefix,
    requestsPerMinute: 20,
    tokensPerMinute: 100_000,
    maxWaitMs: 500,
  })
}

beforeEach(() => clearOfBoundary(60_000, 10_000))
afterEach(async () => {
  await upstream?.close()
  upstream = undefined
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit()))
})

describe('example: outbound calls through limitedFetch', () => {
  it('two replicas follow a provider that allows fewer requests than configured', async () => {
    upstream = await startLlmUpstream({ requests: 8, tokens: 1_000_000, usage: 150 })
    const prefix = `example-outbound-${process.pid}-${Date.now()}`
    const a = await replica(prefix, upstream.url)
    const b = await replica(prefix, upstream.url)
    expect((await a.complete([{ role: 'user', content: 'hi' }], 64)).status).toBe(200)
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) => [a, b][i % 2]!.complete([{ role: 'user', content: `${i}` }], 64)),
    )
    const statuses = results.filter((r) => r.status === 'fulfilled').map((r) => r.value.status)
    const errors = results.filter((r) => r.status === 'rejected').map((r) => r.reason)
    expect(statuses.filter((s) => s === 200)).toHaveLength(7)
    expect(statuses.filter((s) => s === 429).length).toBeLessThanOrEqual(1)
    for (const error of errors) expect(error).toBeInstanceOf(RateLimitTimeoutError)
    await Promise.all([a.flush(), b.flush()])
    // every answered call is charged the 150 tokens the provider reported, not its estimate
    const state = await a.limiter.peek(`${new URL(upstream.url).origin}:000001`, { cost: 0 })
    expect(state.policies.find((p) => p.policy === 'tokens')!.remaining).toBe(100_000 - 150 * upstream.ok)
  })

  it('index.ts runs: a batch answered within the budget', async () => {
    upstream = await startLlmUpstream({ requests: 100, tokens: 1_000_000 })
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'index.ts'], {
      cwd: join(__dirname),
      env: {
        ...process.env,
        REDIS_URL: redisUrl(),
        UPSTREAM: upstream.url,
        CALLS: '5',
        TOLLGATE_PREFIX: `example-outbound-run-${process.pid}-${Date.now()}`,
      },
    })
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toEqual({
      answered: 5,
      refusedUpstream: 0,
      waitedTooLong: 0,
    })
  }, 30_000)
})
