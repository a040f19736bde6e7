/**
 * Concurrency policies on the limiter (real Redis): option validation, the deny cache,
 * attempt() and wait() around a job, and leases taken by the 'local' fallback.
 * The store-level behaviour (slots, release, expiry, with rate policies) is in the store conformance
 * suite (packages/testkit/src/store-suite.ts), the races and the killed holder in concurrency-race.test.ts.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { ConfigError, RateLimiter, type RateLimiterOptions, RedisStore } from '../src'
import type { ScriptClient } from '../src/entries/scripts'
import { nodeRedis } from './clients'

describe('concurrency policies', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let store: RedisStore
  beforeAll(async () => {
    client = await nodeRedis()
    store = new RedisStore(client)
  })
  afterAll(async () => {
    await client.quit()
  })
  const make = (options: Partial<RateLimiterOptions>) =>
    new RateLimiter({ store, prefix: uniquePrefix('conc'), ...options } as RateLimiterOptions)

  describe('bad options throw at construction, naming the option and the value', () => {
    const bad: [string, Record<string, unknown>, RegExp][] = [
      ['concurrency 0', { concurrency: 0 }, /^concurrency must be .*received 0$/],
      ['concurrency fractional', { concurrency: 1.5 }, /^concurrency must be .*received 1\.5$/],
      ['concurrency string', { concurrency: '5' }, /^concurrency must be .*received "5"$/],
      ['concurrency too large', { concurrency: 10_001 }, /^concurrency must be .*10000.*received 10001$/],
      ['lease without concurrency', { lease: '10s' }, /^concurrency must be .*received undefined$/],
      ['lease not a duration', { concurrency: 2, lease: 'soon' }, /^lease must be .*received "soon"$/],
      ['lease 0', { concurrency: 2, lease: 0 }, /^lease must be .*received 0$/],
      ['lease past a day', { concurrency: 2, lease: '2d' }, /^lease must be at most .*received "2d"$/],
      ['limit with concurrency', { concurrency: 2, limit: 5 }, /^limit must be .*'concurrency'.*received 5$/],
      [
        'window with concurrency',
        { concurrency: 2, window: '1m' },
        /^window must be .*'lease'.*received "1m"$/,
      ],
      [
        "algorithm 'concurrency' with limit",
        { algorithm: 'concurrency', limit: 5, window: '1m' },
        /^limit must be .*received 5$/,
      ],
      ['another algorithm', { concurrency: 2, algorithm: 'gcra' }, /^algorithm must be .*received "gcra"$/],
    ]
    it.each(bad)('%s', (_label, options, message) => {
      const error = (() => {
        try {
          make(options)
        } catch (e) {
          return e
        }
      })()
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as Error).message).toMatch(message)
    })

    it('inside named policies, the path names the policy', () => {
      expect(() => make({ policies: { jobs: { concurrency: -1 } } })).toThrow(
        /^policies\.jobs\.concurrency must be .*received -1$/,
      )
      expect(() => make({ policies: { jobs: { concurrency: 1, lease: '2d' } } })).toThrow(
        /^policies\.jobs\.lease must be/,
      )
    })

    it("the lease defaults to 60 s; `algorithm: 'concurrency'` may be spelled out", () => {
      expect(make({ concurrency: 3 }).policies[0]).toMatchObject({
        algorithm: 'concurrency',
        limit: 3,
        windowMs: 60_000,
      })
      expect(
        make({ policies: { a: { concurrency: 3, lease: '5s', algorithm: 'concurrency' } } }).policies[0],
      ).toMatchObject({ algorithm: 'concurrency', limit: 3, windowMs: 5000 })
    })
  })

  it('a concurrency refusal is not cached: the slot a release frees is seen at once', async () => {
    const limiter = make({ concurrency: 1, lease: '1m' }) // deny cache on (the default)
    const held = await limiter.consume('k')
    expect((await limiter.consume('k')).allowed).toBe(false)
    await limiter.release(held)
    const next = await limiter.consume('k')
    expect(next).toMatchObject({ allowed: true, source: 'store' })
  })

  it('a refusal by a rate policy is still cached (no round trip while it lasts)', async () => {
    const limiter = make({
      policies: { rate: { limit: 1, window: '1d' }, inflight: { concurrency: 5 } },
    })
    await limiter.consume('k')
    expect((await limiter.consume('k')).source).toBe('store')
    expect((await limiter.consume('k')).source).toBe('cache')
  })

  it('attempt() releases when the job returns and when it throws', async () => {
    const limiter = make({ concurrency: 1, lease: '1m' })
    await limiter.attempt('k', async () => {
      expect((await limiter.consume('k')).allowed).toBe(false) // held while the job runs
    })
    await expect(
      limiter.attempt('k', () => {
        throw new Error('job failed')
      }),
    ).rejects.toThrow('job failed')
    expect((await limiter.peek('k')).remaining).toBe(1)
  })

  it('wait() polls while only concurrency refuses, and takes the slot once released', async () => {
    const limiter = make({ concurrency: 1, lease: '1m' })
    const held = await limiter.consume('k')
    setTimeout(() => void limiter.release(held), 30)
    const d = await limiter.wait('k', { maxWaitMs: 10_000, pollMs: 10 })
    expect(d.allowed).toBe(true)
    await limiter.release(d)
    // bounded: nobody releases, so it gives up at maxWaitMs, not at the lease's expiry
    await limiter.consume('k')
    await expect(limiter.wait('k', { maxWaitMs: 50, pollMs: 10 })).rejects.toMatchObject({
      code: 'ERR_TOLLGATE_WAIT_TIMEOUT',
    })
    await expect(limiter.wait('k', { pollMs: 0 })).rejects.toThrow(/^pollMs must be/)
  })

  it("leases taken by the 'local' fallback are released in the local store", async () => {
    let fail = false
    const seam: ScriptClient = {
      evalsha: (sha, keys, args) =>
        fail ? Promise.reject(new Error('connection lost')) : client.evalSha(sha, { keys, arguments: args }),
      eval: (source, keys, args) =>
        fail ? Promise.reject(new Error('connection lost')) : client.eval(source, { keys, arguments: args }),
    }
    const flaky = new RedisStore(seam)
    const limiter = new RateLimiter({
      store: flaky,
      prefix: uniquePrefix('conc-local'),
      concurrency: 1,
      onStoreError: 'local',
      breaker: { failures: 1000, cooldownMs: 1000 },
    })
    fail = true
    const held = await limiter.consume('k')
    expect(held).toMatchObject({ allowed: true, source: 'fallback' })
    expect((await limiter.consume('k')).allowed).toBe(false)
    await limiter.release(held)
    expect((await limiter.consume('k')).allowed).toBe(true)
  })

  it('release() of a decision from another limiter is refused; of one without leases, a no-op', async () => {
    const a = make({ concurrency: 1 })
    const b = make({ policies: { other: { concurrency: 1 } } })
    const d = await a.consume('k')
    await expect(b.release(d)).rejects.toThrow(/^decision must be/)
    const rate = make({ limit: 1, window: '1m' })
    await rate.release(await rate.consume('k'))
    expect((await rate.peek('k')).remaining).toBe(0) // release never gives a rate spend back
  })
})
