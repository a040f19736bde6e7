/**
 * Redis over HTTP: `@upstash/redis` and `@vercel/kv` as RedisStore clients, against the testkit's Upstash
 * REST server in front of a real redis-server (no Upstash service is reachable from our machines).
 */
import {
  type RedisServerHandle,
  redisUrl,
  startRedisServer,
  startUpstashServer,
  type UpstashServer,
} from '@tollgate/testkit'
import { describeStore, type StoreFixture, uniquePrefix } from '@tollgate/testkit/store-suite'
import { Redis } from '@upstash/redis'
import { createClient as createKv } from '@vercel/kv'
import { createClient } from 'redis'
import { RateLimiter, RedisStore } from '../../index'

const nodeAdmin = (url: string) =>
  createClient({ url })
    .on('error', () => {})
    .connect()

/** A deadline no busy machine reaches, for the tests that are not about the deadline. */
const SLOW_OK = 5000

const suitePort = () => Number(new URL(redisUrl()).port)

async function restFixture(make: (rest: UpstashServer) => Redis): Promise<StoreFixture> {
  const rest = await startUpstashServer({ redisPort: suitePort() })
  const redis = make(rest)
  return {
    store: new RedisStore(redis),
    close: () => rest.stop(),
    pttl: (key) => redis.pttl(key),
    exists: async (key) => (await redis.exists(key)) === 1,
    zcard: (key) => redis.zcard(key),
    // A REST round trip on a machine busy with other test files can pass the default 500 ms.
    timeoutMs: SLOW_OK,
    // Five REST round trips must fit well inside the window of the tests that wait for it to pass.
    shortWindowMs: 3000,
  }
}

describeStore('RedisStore (@upstash/redis over REST)', () =>
  restFixture((rest) => new Redis({ url: rest.url, token: rest.token, retry: false })),
)

function commandCalls(info: string, name: string): number {
  const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)
  return m ? Number(m[1]) : 0
}

describe('@upstash/redis specifics', () => {
  // A redis-server of its own: SCRIPT FLUSH and command counters are server-wide.
  let own: RedisServerHandle
  let rest: UpstashServer
  let admin: Awaited<ReturnType<typeof nodeAdmin>>
  beforeAll(async () => {
    own = await startRedisServer()
    rest = await startUpstashServer({ redisPort: own.port })
    admin = await nodeAdmin(own.url)
  })
  afterAll(async () => {
    await admin?.quit()
    await rest?.stop()
    await own?.stop()
  })
  afterEach(() => {
    rest.fault = undefined
  })

  const client = (opts: { autoPipelining?: boolean; token?: string } = {}) =>
    new Redis({
      url: rest.url,
      token: opts.token ?? rest.token,
      retry: false,
      enableAutoPipelining: opts.autoPipelining ?? true,
    })

  it('is detected as upstash, with or without auto-pipelining, and through @vercel/kv', () => {
    expect(new RedisStore(client()).kind).toBe('upstash')
    expect(new RedisStore(client({ autoPipelining: false })).kind).toBe('upstash')
    expect(new RedisStore(createKv({ url: rest.url, token: rest.token })).kind).toBe('upstash')
  })

  it('SCRIPT FLUSH mid-stream is invisible: one EVAL after NOSCRIPT, then EVALSHA again', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore(client()),
      prefix: uniquePrefix('rest-flush'),
      limit: 5,
      window: '1d',
      timeoutMs: SLOW_OK,
    })
    expect((await limiter.consume('k')).remaining).toBe(4)
    await admin.scriptFlush()
    await admin.configResetStat()
    expect((await limiter.consume('k')).remaining).toBe(3)
    expect((await limiter.consume('k')).remaining).toBe(2)
    const info = await admin.info('commandstats')
    expect(commandCalls(info, 'eval')).toBe(1)
    expect(commandCalls(info, 'evalsha')).toBe(2)
  })

  it("the plain seam recognises the auto-pipeline's `Command failed: NOSCRIPT` and recovers", async () => {
    const redis = client({ autoPipelining: true })
    // The documented seam, wired straight to the client's methods: its auto-pipeline wraps errors.
    const store = new RedisStore({
      evalsha: (sha: string, keys: string[], args: string[]) => redis.evalsha(sha, keys, args),
      eval: (source: string, keys: string[], args: string[]) => redis.eval(source, keys, args),
    })
    expect(store.kind).toBe('custom')
    const limiter = new RateLimiter({
      store,
      prefix: uniquePrefix('seam'),
      limit: 5,
      window: '1d',
      timeoutMs: SLOW_OK,
    })
    await admin.scriptFlush()
    const d = await limiter.consume('k')
    expect(d.source).not.toBe('fallback')
    expect(d.remaining).toBe(4)
  })

  it('the calls of one turn leave as one /pipeline request: 30 at once against limit 5 admit 5', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore(client()),
      prefix: uniquePrefix('batch'),
      limit: 5,
      window: '1d',
      timeoutMs: SLOW_OK,
      denyCache: false,
    })
    await limiter.peek('warm') // scripts cached on the server (a NOSCRIPT round would add a request)
    rest.resetCounters()
    const ds = await Promise.all(Array.from({ length: 30 }, () => limiter.consume('k')))
    expect(ds.filter((d) => d.allowed)).toHaveLength(5)
    expect(ds.every((d) => d.source !== 'fallback')).toBe(true)
    expect(rest.requests).toBe(1)
    expect(rest.commands).toBe(30)
  })

  it('NOSCRIPT for some commands of a /pipeline: those alone go again as EVAL, every call is decided', async () => {
    const store = new RedisStore(client())
    const make = (algorithm: 'fixed-window' | 'sliding-window') =>
      new RateLimiter({
        store,
        prefix: uniquePrefix(`pipeline-noscript-${algorithm}`),
        limit: 5,
        window: '1d',
        algorithm,
        timeoutMs: SLOW_OK,
        denyCache: false,
      })
    const fixed = make('fixed-window')
    const sliding = make('sliding-window')
    await admin.scriptFlush()
    await fixed.consume('warm') // the fixed-window consume script is cached again, the sliding-window one not
    await admin.configResetStat()
    rest.resetCounters()
    // One turn: the fixed-window calls' EVALSHAs succeed, the sliding-window calls' say NOSCRIPT, all
    // inside one /pipeline answered 200.
    const ds = await Promise.all([
      fixed.consume('k'),
      sliding.consume('k'),
      fixed.consume('k'),
      sliding.consume('k'),
      fixed.consume('k'),
      sliding.consume('k'),
    ])
    expect(ds.map((d) => d.source)).not.toContain('fallback')
    expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, true])
    expect(ds.map((d) => d.remaining)).toEqual([4, 4, 3, 3, 2, 2])
    const info = await admin.info('commandstats')
    expect(commandCalls(info, 'evalsha')).toBe(6)
    expect(commandCalls(info, 'eval')).toBe(3) // the three NOSCRIPT ones, and only those
    // The first /pipeline (six EVALSHAs), then one /pipeline with the three EVALs.
    expect(rest.requests).toBe(2)
    expect(rest.commands).toBe(9)
    expect((await fixed.peek('k')).remaining).toBe(2)
    expect((await sliding.peek('k')).remaining).toBe(2)
  })

  it.each([
    ['@upstash/redis', () => client()],
    ['@vercel/kv', () => createKv({ url: rest.url, token: rest.token })],
  ])('%s: several policies, refund, peek and reset over REST', async (_name, make) => {
    const limiter = new RateLimiter({
      store: new RedisStore(make()),
      prefix: uniquePrefix('multi'),
      timeoutMs: SLOW_OK,
      policies: {
        ip: { limit: 10, window: '1d' },
        account: { limit: 3, window: '1d', algorithm: 'fixed-window' },
      },
    })
    const key = { ip: 'ip:1', account: 'acct:1' }
    const d = await limiter.consume(key)
    expect(d.policies.map((p) => p.remaining)).toEqual([9, 2])
    await limiter.refund(d)
    expect((await limiter.peek(key)).policies.map((p) => p.remaining)).toEqual([10, 3])
    await limiter.consume(key, { cost: 3 })
    expect((await limiter.consume(key)).allowed).toBe(false)
    await limiter.reset(key)
    expect((await limiter.consume(key)).policies.map((p) => p.remaining)).toEqual([9, 2])
  })

  it('the deadline aborts the REST request: the caller gets the failure policy, Redis never sees it', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore(client()),
      prefix: uniquePrefix('deadline'),
      limit: 5,
      window: '1d',
      timeoutMs: 150,
      onStoreError: 'deny',
    })
    await limiter.peek('k')
    rest.resetCounters()
    rest.fault = { delayMs: 600 }
    const d = await limiter.consume('k')
    expect(d).toMatchObject({ allowed: false, source: 'fallback' })
    // The server waits out its delay, then finds the request's connection gone.
    await new Promise((resolve) => setTimeout(resolve, 800))
    expect(rest.dropped).toBe(1)
    rest.fault = undefined
    expect((await limiter.peek('k')).remaining).toBe(5) // nothing was spent
  })

  it.each([
    ['a 502 HTML page', { status: 502, body: '<html>Bad Gateway</html>' }],
    ['a 500 JSON error', { status: 500, body: '{"error":"ERR internal"}', contentType: 'application/json' }],
    ['a reset connection', { reset: true as const }],
  ])('%s goes to the failure policy (deny: refused, allow: admitted without quota)', async (_name, fault) => {
    const events: { type: string; error?: unknown }[] = []
    const make = (onStoreError: 'allow' | 'deny') =>
      new RateLimiter({
        store: new RedisStore(client()),
        prefix: uniquePrefix('fault'),
        limit: 5,
        window: '1d',
        timeoutMs: SLOW_OK,
        onStoreError,
        onEvent: (e) => events.push(e as { type: string; error?: unknown }),
      })
    rest.fault = fault
    expect(await make('deny').consume('user@example.com')).toMatchObject({
      allowed: false,
      source: 'fallback',
    })
    expect(await make('allow').consume('user@example.com')).toMatchObject({
      allowed: true,
      limit: 0,
      source: 'fallback',
    })
    const error = events.find((e) => e.type === 'store-error')?.error as Error
    expect(error).toBeDefined()
    // The client's ", command was: [...]" (keys, Lua source) is not copied into the error.
    expect(error.message).not.toContain('user@example.com')
  })

  it('a wrong token (401) goes to the failure policy', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore(client({ token: 'wrong' })),
      prefix: uniquePrefix('auth'),
      limit: 5,
      window: '1d',
      timeoutMs: SLOW_OK,
      onStoreError: 'deny',
    })
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, source: 'fallback' })
  })
})
