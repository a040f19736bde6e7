/**
 * limitedFetch against a local server that limits like an LLM provider (its own counters, OpenAI's
 * x-ratelimit-* fields, 429 + Retry-After past them) and the suite's real Redis. Two "processes" are two
 * limiters on two Redis clients sharing one prefix. Day-long fixed windows: no boundary falls inside a
 * test (clearOfBoundary), so counts are exact; nothing asserts on timings.
 */
import { RateLimitedError, RateLimiter, RateLimitTimeoutError, RedisStore } from '@tollgate/core'
import { type LimitedFetchOptions, limitedFetch } from '@tollgate/fetch'
import { clearOfBoundary, type LlmUpstream, redisUrl, startLlmUpstream } from '@tollgate/testkit'
import { createClient } from 'redis'

type Client = ReturnType<typeof createClient>
const clients: Client[] = []
let upstream: LlmUpstream | undefined
let n = 0

async function store(): Promise<RedisStore> {
  const client: Client = createClient({ url: redisUrl() })
  client.on('error', () => undefined)
  await client.connect()
  clients.push(client)
  return new RedisStore(client)
}

/** `count` processes of one fleet: each its own Redis client and limiter, one shared prefix. */
async function fleet(
  count: number,
  policies: { requests: number; tokens?: number },
  window: '1d' | '1s' = '1d',
): Promise<RateLimiter[]> {
  const prefix = `outbound-${process.pid}-${Date.now().toString(36)}-${++n}`
  const limiters: RateLimiter[] = []
  for (let i = 0; i < count; i++) {
    limiters.push(
      new RateLimiter({
        store: await store(),
        prefix,
        policies: {
          requests: { limit: policies.requests, window, algorithm: 'fixed-window' },
          ...(policies.tokens !== undefined && {
            tokens: { limit: policies.tokens, window, algorithm: 'fixed-window' },
          }),
        },
      }),
    )
  }
  return limiters
}

const chat = (usage?: number): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], metadata: { usage } }),
})
const usageOf = async (res: Response) =>
  ((await res.json()) as { usage?: { total_tokens?: number } }).usage?.total_tokens

/** Calls `f` `count` times at once; counts the upstream's answers and the calls refused before it. */
async function burst(fetches: ((url: string, init?: RequestInit) => Promise<Response>)[], count: number) {
  const results = await Promise.allSettled(
    Array.from({ length: count }, (_, i) =>
      fetches[i % fetches.length]!(`${upstream!.url}/v1/chat/completions`, chat()),
    ),
  )
  const statuses = results.filter((r) => r.status === 'fulfilled').map((r) => r.value.status)
  const errors = results.filter((r) => r.status === 'rejected').map((r) => r.reason)
  for (const error of errors) expect(error).toBeInstanceOf(RateLimitedError)
  return {
    ok: statuses.filter((s) => s === 200).length,
    upstream429: statuses.filter((s) => s === 429).length,
    refused: errors.length,
  }
}

beforeEach(() => clearOfBoundary(86_400_000, 10_000))
afterEach(async () => {
  await upstream?.close()
  upstream = undefined
})
afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit()))
})

describe('limitedFetch', () => {
  it('the right budget, shared by two processes: a concurrent burst never meets an upstream 429', async () => {
    upstream = await startLlmUpstream({ requests: 10, tokens: 1_000_000 })
    const limiters = await fleet(2, { requests: 10 })
    const fetches = limiters.map((limiter) => limitedFetch({ limiter, wait: false }))
    const { ok, upstream429, refused } = await burst(fetches, 30)
    expect(ok).toBe(10)
    expect(upstream429).toBe(0)
    expect(refused).toBe(20)
    expect(upstream.limited).toBe(0)
  })

  it('an upstream with less than configured: after the first response the whole fleet follows it', async () => {
    upstream = await startLlmUpstream({ requests: 5, tokens: 1_000_000 })
    const [a, b] = await fleet(2, { requests: 20 })
    const fa = limitedFetch({ limiter: a!, wait: false })
    const fb = limitedFetch({ limiter: b!, wait: false })
    const first = await fa(`${upstream.url}/v1/chat/completions`, chat())
    expect(first.status).toBe(200)
    // the other process, which saw no response, already counts what the upstream reported
    const seen = await b!.peek(new URL(upstream.url).origin, { cost: 0 })
    expect(seen.policies[0]!.remaining).toBe(4)
    const { ok, upstream429 } = await burst([fa, fb], 20)
    expect(ok).toBe(4)
    expect(upstream429).toBeLessThanOrEqual(1)
    expect(upstream.ok).toBe(5)
  })

  it('a process alone follows the upstream too: no call past what it reports', async () => {
    upstream = await startLlmUpstream({ requests: 3, tokens: 1_000_000 })
    const [a] = await fleet(1, { requests: 50 })
    const f = limitedFetch({ limiter: a!, wait: false })
    const statuses: number[] = []
    let refused = 0
    for (let i = 0; i < 6; i++) {
      try {
        statuses.push((await f(`${upstream.url}/x`, chat())).status)
      } catch (error) {
        expect(error).toBeInstanceOf(RateLimitedError)
        refused++
      }
    }
    expect(statuses).toEqual([200, 200, 200])
    expect(refused).toBe(3)
    expect(upstream.limited).toBe(0)
  })

  it("an upstream 429 (another app spent the account): every process holds off, the 429 is the caller's", async () => {
    upstream = await startLlmUpstream({ requests: 2, tokens: 1_000_000 })
    for (let i = 0; i < 2; i++) await fetch(`${upstream.url}/other-app`, chat())
    const [a, b] = await fleet(2, { requests: 10 })
    const fa = limitedFetch({ limiter: a!, wait: false })
    const fb = limitedFetch({ limiter: b!, wait: false })
    const refused = await fa(`${upstream.url}/v1/chat/completions`, chat())
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).not.toBeNull()
    for (const f of [fa, fb]) {
      const error = await f(`${upstream.url}/v1/chat/completions`, chat()).catch((e) => e)
      expect(error).toBeInstanceOf(RateLimitedError)
      expect(error.decision.retryAfterMs).toBeGreaterThan(0)
    }
    expect(upstream.limited).toBe(1)
  })

  it('waits for the budget, bounded by maxWaitMs', async () => {
    upstream = await startLlmUpstream({ requests: 100, tokens: 1_000_000 })
    const [short] = await fleet(1, { requests: 1 }, '1s')
    const waiting = limitedFetch({ limiter: short!, wait: { maxWaitMs: 10_000 } })
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await waiting(`${upstream.url}/x`, chat())).status)
    expect(statuses).toEqual([200, 200, 200])

    const [long] = await fleet(1, { requests: 1 })
    const bounded = limitedFetch({ limiter: long!, wait: { maxWaitMs: 1000 } })
    expect((await bounded(`${upstream.url}/x`, chat())).status).toBe(200)
    await expect(bounded(`${upstream.url}/x`, chat())).rejects.toBeInstanceOf(RateLimitTimeoutError)
    expect(upstream.ok).toBe(4)
  })

  it('nothing left upstream: a waiting call waits for its reset instead of meeting a 429', async () => {
    // one request per 1.5 s upstream; its reset is reported in ms, so the wait ends in a fresh window
    upstream = await startLlmUpstream({ requests: 1, tokens: 1_000_000, windowMs: 1500 })
    const [a] = await fleet(1, { requests: 5 }, '1s')
    const f = limitedFetch({ limiter: a!, wait: { maxWaitMs: 10_000 } })
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await f(`${upstream.url}/x`, chat())).status)
    expect(statuses).toEqual([200, 200, 200])
    expect(upstream.limited).toBe(0)
  })

  it('settles tokens from the usage the response reports', async () => {
    upstream = await startLlmUpstream({ requests: 100, tokens: 100_000, usage: 300 })
    const [a] = await fleet(1, { requests: 100, tokens: 100_000 })
    const f = limitedFetch({ limiter: a!, wait: false, cost: () => ({ tokens: 1000 }), tokensOf: usageOf })
    const res = await f(`${upstream.url}/v1/chat/completions`, chat())
    // the caller's body is untouched by tokensOf, which reads a clone
    expect(await usageOf(res)).toBe(300)
    await f.flush()
    const state = await a!.peek(new URL(upstream.url).origin, { cost: 0 })
    expect(state.policies.find((p) => p.policy === 'tokens')!.remaining).toBe(100_000 - 300)
    expect(state.policies.find((p) => p.policy === 'requests')!.remaining).toBe(99)
  })

  it('follows the tokens the upstream reports left, after settling', async () => {
    upstream = await startLlmUpstream({ requests: 100, tokens: 2_000, usage: 300 })
    const [a, b] = await fleet(2, { requests: 100, tokens: 100_000 })
    const f = limitedFetch({ limiter: a!, wait: false, cost: () => ({ tokens: 500 }), tokensOf: usageOf })
    await f(`${upstream.url}/v1/chat/completions`, chat())
    await f.flush()
    const state = await b!.peek(new URL(upstream.url).origin, { cost: 0 })
    expect(state.policies.find((p) => p.policy === 'tokens')!.remaining).toBe(1_700)
  })

  it('keys per upstream by default, or by the key function', async () => {
    upstream = await startLlmUpstream({ requests: 100, tokens: 1_000_000 })
    const [a] = await fleet(1, { requests: 1 })
    const f = limitedFetch({
      limiter: a!,
      wait: false,
      key: (_input, init) => String(new Headers(init?.headers).get('x-team')),
    })
    const team = (name: string) => ({ ...chat(), headers: { 'x-team': name } })
    expect((await f(`${upstream.url}/x`, team('a'))).status).toBe(200)
    expect((await f(`${upstream.url}/x`, team('b'))).status).toBe(200)
    await expect(f(`${upstream.url}/x`, team('a'))).rejects.toBeInstanceOf(RateLimitedError)
  })

  it('bad options: ConfigError naming the option, at construction', async () => {
    const [a] = await fleet(1, { requests: 1 })
    const cases: [Partial<LimitedFetchOptions>, string][] = [
      [{ limiter: {} as RateLimiter }, 'limiter'],
      [{ limiter: a!, key: 'origin' as never }, 'key'],
      [{ limiter: a!, wait: { maxWaitMs: -1 } }, 'wait.maxWaitMs'],
      [{ limiter: a!, wait: true as never }, 'wait'],
      [{ limiter: a!, follow: { tokens: 'nope' } }, 'follow.tokens'],
      [{ limiter: a!, tokensOf: usageOf }, 'tokensOf'],
      [{ limiter: a!, fetch: 1 as never }, 'fetch'],
    ]
    for (const [options, option] of cases) {
      expect(() => limitedFetch(options as LimitedFetchOptions)).toThrow(
        expect.objectContaining({ code: 'ERR_TOLLGATE_CONFIG', option }),
      )
    }
  })
})
