/**
 * Issue 9 item 13: a limiter with 8,000 policies consumed fine but its `reset()` failed inside Redis
 * ("too many results to unpack": reset.lua unpacks every key into one DEL). Policies per limiter and
 * identities per call are capped at MAX_POLICIES, where every script works; past it, ConfigError at
 * construction and InputError per call, before any Redis command.
 */
import { ConfigError, InputError, RateLimiter, RedisStore } from '../src'
import { MAX_POLICIES, type ScriptClient } from '../src/entries/scripts'
import type { PolicyOptions } from '../src/types'
import { nodeRedis } from './clients'

const ALGORITHMS = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra'] as const

/** `n` policies, every algorithm in turn, each allowing 2 per day (no window boundary inside a test). */
function policies(n: number): Record<string, PolicyOptions> {
  const out: Record<string, PolicyOptions> = {}
  for (let i = 0; i < n; i++) out[`p${i}`] = { limit: 2, window: '1d', algorithm: ALGORITHMS[i % 5] }
  return out
}

describe(`at most ${MAX_POLICIES} policies and identities per call`, () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let store: RedisStore
  let calls = 0
  beforeAll(async () => {
    client = await nodeRedis()
    const seam: ScriptClient = {
      evalsha: (sha, keys, args) => {
        calls++
        return client.evalSha(sha, { keys, arguments: args })
      },
      eval: (source, keys, args) => {
        calls++
        return client.eval(source, { keys, arguments: args })
      },
    }
    store = new RedisStore(seam)
  })
  afterAll(async () => {
    await client.quit()
  })

  it('at the cap, every script works: consume, peek, refund, reset (string and record keys)', async () => {
    const prefix = `caps-${process.pid}-${Date.now().toString(36)}`
    const limiter = new RateLimiter({ store, prefix, policies: policies(MAX_POLICIES), timeoutMs: 10_000 })
    const record = Object.fromEntries(limiter.policies.map((p) => [p.name, `user:${p.name}`]))
    for (const key of ['user:all', record]) {
      const first = await limiter.consume(key)
      expect(first.allowed).toBe(true)
      expect(first.policies).toHaveLength(MAX_POLICIES)
      expect((await limiter.consume(key)).allowed).toBe(true)
      expect((await limiter.peek(key)).remaining).toBe(0)
      await limiter.refund(first)
      expect((await limiter.peek(key)).allowed).toBe(true)
      expect(await client.keys(`${prefix}:*`)).not.toHaveLength(0)
      await limiter.reset(key)
      // Only the refund's marker is left (it names a spend, not the identity's state), and it expires.
      const left = await client.keys(`${prefix}:*`)
      expect(left.every((k) => k.includes('!'))).toBe(true)
      for (const k of left) expect(await client.pTTL(k)).toBeGreaterThan(0)
      expect((await limiter.peek(key)).remaining).toBe(2)
    }
  })

  it.each([MAX_POLICIES + 1, 8000])('%i policies: a ConfigError at construction', (n) => {
    calls = 0
    const build = () => new RateLimiter({ store, policies: policies(n) })
    expect(build).toThrow(ConfigError)
    expect(build).toThrow(expect.objectContaining({ option: 'policies' }))
    expect(calls).toBe(0)
  })

  it('a record key with one identity more is an InputError before any Redis command', async () => {
    const limiter = new RateLimiter({ store, policies: policies(3) })
    const record: Record<string, string> = {}
    for (let i = 0; i <= MAX_POLICIES; i++) record[`p${i}`] = `user:${i}`
    calls = 0
    for (const call of [
      () => limiter.consume(record),
      () => limiter.peek(record),
      () => limiter.reset(record),
    ]) {
      await expect(call()).rejects.toThrow(InputError)
      await expect(call()).rejects.toMatchObject({ argument: 'key' })
    }
    expect(calls).toBe(0)
  })
})
