/**
 * Core observability: the `tollgate:decision`, `tollgate:wait` and `tollgate:store` channels, the
 * limiter's `name`, shadow mode (limiter, policy, call) and `wait()` jitter, against a real Redis.
 */
import dc from 'node:diagnostics_channel'
import { at, redisUrl, take } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { ConfigError, type Decision, RateLimiter, RedisStore } from '../src'
import {
  type DecisionMessage,
  type StoreCallContext,
  storeErrorKind,
  type WaitMessage,
} from '../src/entries/observability'
import { StoreTimeoutError } from '../src/errors'
import { nodeRedis } from './clients'

type Client = Awaited<ReturnType<typeof nodeRedis>>

function listen<T>(name: string): { messages: T[]; stop(): void } {
  const messages: T[] = []
  const fn = (m: unknown) => messages.push(m as T)
  dc.subscribe(name, fn)
  return { messages, stop: () => dc.unsubscribe(name, fn) }
}

describe('observability in core', () => {
  let client: Client
  let store: RedisStore
  beforeAll(async () => {
    client = await nodeRedis()
    store = new RedisStore(client)
  })
  afterAll(async () => {
    await client.quit()
  })

  it('publishes every decision on tollgate:decision with name, operation, source and duration', async () => {
    const sub = listen<DecisionMessage>('tollgate:decision')
    try {
      const limiter = new RateLimiter({
        store,
        name: 'api',
        prefix: uniquePrefix('dc'),
        limit: 1,
        window: '1m',
      })
      await limiter.consume('u')
      await limiter.consume('u') // refused by the store, then cached
      await limiter.consume('u') // deny cache
      await limiter.peek('u')
      const mine = sub.messages.filter((m) => m.limiter === 'api')
      expect(mine.map((m) => [m.operation, m.decision.allowed, m.decision.source])).toEqual([
        ['consume', true, 'store'],
        ['consume', false, 'store'],
        ['consume', false, 'cache'],
        ['peek', false, 'store'],
      ])
      expect(mine.every((m) => m.durationMs > 0 && m.policies.join() === 'default')).toBe(true)
    } finally {
      sub.stop()
    }
  })

  it("carries the policies' algorithms, parallel to their names, for store and failure-policy answers", async () => {
    const sub = listen<DecisionMessage>('tollgate:decision')
    // A real client that never connects: RedisStore sends its calls to the failure policy.
    const offline = createClient({ url: redisUrl() })
    offline.on('error', () => {})
    try {
      const policies = {
        ip: { limit: 5, window: '1m', algorithm: 'gcra' },
        account: { limit: 1, window: '1m', algorithm: 'fixed-window' },
        day: { limit: 100, window: '1d' }, // the default: sliding-window
      } as const
      const up = new RateLimiter({ store, name: 'algs-up', prefix: uniquePrefix('al'), policies })
      const down = new RateLimiter({
        store: new RedisStore(offline),
        name: 'algs-down',
        prefix: uniquePrefix('ad'),
        policies,
        onStoreError: 'deny',
      })
      const keys = { ip: 'ip:1', account: 'a:1', day: 'a:1' }
      await up.consume(keys)
      await up.consume(keys) // refused by account
      await down.consume(keys)
      const expected = ['gcra', 'fixed-window', 'sliding-window']
      const upMessages = sub.messages.filter((m) => m.limiter === 'algs-up')
      expect(upMessages.map((m) => [m.decision.source, m.decision.allowed])).toEqual([
        ['store', true],
        ['store', false],
      ])
      for (const m of upMessages) {
        expect(m.policies).toEqual(['ip', 'account', 'day'])
        expect(m.algorithms).toEqual(expected)
        // The same as each pair's own algorithm, where a store answer has pairs.
        expect(m.decision.policies.map((p) => p.algorithm)).toEqual(expected)
      }
      const [fallback] = take(
        sub.messages.filter((m) => m.limiter === 'algs-down'),
        1,
      )
      expect([fallback.decision.source, fallback.decision.allowed, fallback.failurePolicy]).toEqual([
        'fallback',
        false,
        'deny',
      ])
      expect(fallback.decision.policies).toEqual([]) // nothing to read an algorithm from but `algorithms`
      expect(fallback.algorithms).toEqual(expected)
      // Built once per limiter: every message carries the same arrays.
      expect(at(upMessages, 1).algorithms).toBe(at(upMessages, 0).algorithms)
      expect(at(upMessages, 1).policies).toBe(at(upMessages, 0).policies)
    } finally {
      sub.stop()
    }
  })

  it('name defaults to the prefix and is validated', () => {
    const prefix = uniquePrefix('nm')
    expect(new RateLimiter({ store, prefix, limit: 1, window: '1m' }).name).toBe(prefix)
    expect(() => new RateLimiter({ store, name: 'a b', limit: 1, window: '1m' })).toThrow(ConfigError)
    expect(() => new RateLimiter({ store, name: 'x'.repeat(65), limit: 1, window: '1m' })).toThrow(/name/)
    expect(() => new RateLimiter({ store, shadow: 'yes' as never, limit: 1, window: '1m' })).toThrow(/shadow/)
    expect(
      () =>
        new RateLimiter({
          store,
          policies: { a: { limit: 1, window: '1m', shadow: 1 as never } },
        }),
    ).toThrow(/policies\.a\.shadow/)
  })

  it('traces store calls on tollgate:store with operation, pairs, batch size and error kind', async () => {
    const starts = listen<StoreCallContext>('tracing:tollgate:store:start')
    const ends = listen<StoreCallContext>('tracing:tollgate:store:asyncEnd')
    const errors = listen<StoreCallContext>('tracing:tollgate:store:error')
    try {
      const limiter = new RateLimiter({
        store,
        name: 'traced',
        prefix: uniquePrefix('tr'),
        policies: { a: { limit: 5, window: '1m' }, b: { limit: 5, window: '1m' } },
      })
      await limiter.consume('u')
      await limiter.reset('u')
      const failing = new RateLimiter({
        store: new RedisStore({
          evalsha: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1')),
          eval: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1')),
        }),
        name: 'down',
        limit: 1,
        window: '1m',
      })
      expect((await failing.consume('u')).source).toBe('fallback')
      const mine = ends.messages.filter((m) => m.limiter === 'traced')
      expect(mine.map((m) => [m.operation, m.pairs, m.batchSize])).toEqual([
        ['consume', 2, 1],
        ['reset', 2, 1],
      ])
      expect(mine.every((m) => typeof m.durationMs === 'number')).toBe(true)
      expect(starts.messages.filter((m) => m.limiter === 'traced')).toHaveLength(2)
      expect(errors.messages.filter((m) => m.limiter === 'down').map((m) => m.errorKind)).toEqual([
        'connection',
      ])
    } finally {
      starts.stop()
      ends.stop()
      errors.stop()
    }
  })

  it('traces a concurrency release as operation release, not refund, and a refund as refund', async () => {
    const ends = listen<StoreCallContext>('tracing:tollgate:store:asyncEnd')
    try {
      const jobs = new RateLimiter({
        store,
        name: 'leases',
        prefix: uniquePrefix('rel'),
        policies: { slots: { concurrency: 2, lease: '1m' }, rate: { limit: 10, window: '1d' } },
      })
      const d = await jobs.consume('tenant:1')
      expect(d.allowed).toBe(true)
      await jobs.release(d)
      await jobs.release(d) // released already: no store call
      await jobs.refund(await jobs.consume('tenant:1'))
      const mine = ends.messages.filter((m) => m.limiter === 'leases')
      expect(mine.map((m) => m.operation)).toEqual(['consume', 'release', 'consume', 'refund'])
      expect(at(mine, 1).pairs).toBe(1) // the concurrency pair only
    } finally {
      ends.stop()
    }
  })

  it('reports the batch a store call went in: the first call of a turn alone, the rest together', async () => {
    const ends = listen<StoreCallContext>('tracing:tollgate:store:asyncEnd')
    try {
      const limiter = new RateLimiter({
        store,
        name: 'batched',
        prefix: uniquePrefix('bs'),
        limit: 50,
        window: '1d',
      })
      await Promise.all(Array.from({ length: 10 }, (_, i) => limiter.consume(`u${i % 3}`)))
      const sizes = ends.messages.filter((m) => m.limiter === 'batched').map((m) => m.batchSize)
      expect(sizes.sort((a, b) => a - b)).toEqual([1, 9, 9, 9, 9, 9, 9, 9, 9, 9])
    } finally {
      ends.stop()
    }
  })

  it('classifies store errors by kind, never by message', () => {
    expect(storeErrorKind(new StoreTimeoutError(5))).toBe('timeout')
    expect(storeErrorKind(new Error('OOM command not allowed when used memory > maxmemory'))).toBe('server')
    expect(storeErrorKind(new Error('The client is closed'))).toBe('connection')
    expect(storeErrorKind(new Error('whatever'))).toBe('other')
  })

  describe('shadow mode', () => {
    it('limiter shadow: decides with the same store state as enforced, never refuses', async () => {
      const prefix = uniquePrefix('sh')
      const shadow = new RateLimiter({ store, prefix, limit: 2, window: '1m', shadow: true })
      const enforced = new RateLimiter({ store, prefix: uniquePrefix('en'), limit: 2, window: '1m' })
      const got: Decision[] = []
      const want: Decision[] = []
      for (let i = 0; i < 4; i++) {
        got.push(await shadow.consume('u'))
        want.push(await enforced.consume('u'))
      }
      expect(got.map((d) => d.allowed)).toEqual([true, true, true, true])
      expect(want.map((d) => d.allowed)).toEqual([true, true, false, false])
      expect(got.map((d) => d.shadow)).toEqual([undefined, undefined, ['default'], ['default']])
      expect(got.map((d) => d.remaining)).toEqual(want.map((d) => d.remaining))
      // A shadow refusal spent nothing, exactly like the enforced refusal: peek agrees.
      expect((await shadow.peek('u', { shadow: false })).remaining).toBe(0)
      expect(at(got, 2).retryAfterMs).toBe(0)
      expect(at(got, 2).refundToken).toBeUndefined()
    })

    it('a shadow policy never changes what the enforced policies spend', async () => {
      const prefix = uniquePrefix('mix')
      const mixed = new RateLimiter({
        store,
        prefix,
        policies: { burst: { limit: 1, window: '1m', shadow: true }, day: { limit: 3, window: '1m' } },
      })
      const outcomes: Array<[boolean, readonly string[] | undefined, number]> = []
      for (let i = 0; i < 5; i++) {
        const d = await mixed.consume('u')
        outcomes.push([d.allowed, d.shadow, at(d.policies, 1).remaining])
      }
      // 'day' admits 3 then refuses, as without 'burst'; 'burst' would have refused from the 2nd call on.
      expect(outcomes).toEqual([
        [true, undefined, 2],
        [true, ['burst'], 1],
        [true, ['burst'], 0],
        [false, ['burst'], 0],
        [false, ['burst'], 0],
      ])
      // The shadow policy spent once (its own first admission), as it would have if enforced.
      const peek = await mixed.peek('u', { shadow: true })
      expect(peek.policies.map((p) => [p.policy, p.remaining])).toEqual([
        ['burst', 0],
        ['day', 0],
      ])
    })

    it('refunds of a mixed decision give back only what was spent', async () => {
      const prefix = uniquePrefix('mixr')
      const mixed = new RateLimiter({
        store,
        prefix,
        policies: { burst: { limit: 1, window: '1m', shadow: true }, day: { limit: 3, window: '1m' } },
      })
      await mixed.consume('u')
      const second = await mixed.consume('u')
      expect(second.shadow).toEqual(['burst'])
      await mixed.refund(second)
      const peek = await mixed.peek('u')
      expect(peek.policies.map((p) => p.remaining)).toEqual([0, 2])
    })

    it('per-call shadow and the failure policy: a shadow call never refuses, even under deny', async () => {
      const down = new RateLimiter({
        store: new RedisStore({
          evalsha: () => Promise.reject(new Error('ECONNREFUSED')),
          eval: () => Promise.reject(new Error('ECONNREFUSED')),
        }),
        limit: 1,
        window: '1m',
        onStoreError: 'deny',
      })
      expect((await down.consume('u')).allowed).toBe(false)
      const d = await down.consume('u', { shadow: true })
      expect([d.allowed, d.source, d.shadow]).toEqual([true, 'fallback', ['default']])
    })
  })

  describe('wait()', () => {
    it('publishes the time spent waiting and the outcome on tollgate:wait', async () => {
      const sub = listen<WaitMessage>('tollgate:wait')
      try {
        const limiter = new RateLimiter({
          store,
          name: 'jobs',
          prefix: uniquePrefix('w'),
          limit: 1,
          window: 300,
          // gcra, not an aligned window: a fixed window's boundary between the two calls would admit
          // the second at its first attempt.
          algorithm: 'gcra',
        })
        await limiter.wait('u')
        await limiter.wait('u', { jitter: 0.5 })
        await expect(limiter.wait('u', { cost: 2 })).rejects.toThrow(/wait/) // never admissible: no clock involved
        const mine = sub.messages.filter((m) => m.limiter === 'jobs')
        expect(mine.map((m) => [m.outcome, m.attempts])).toEqual([
          ['admitted', 1],
          ['admitted', 2],
          ['timeout', 1],
        ])
        expect(at(mine, 0).waitedMs).toBe(0)
        expect(at(mine, 1).waitedMs).toBeGreaterThan(0)
      } finally {
        sub.stop()
      }
    })

    it('jitter sleeps at least retryAfterMs and at most (1 + jitter) x retryAfterMs, never past maxWaitMs', async () => {
      const sub = listen<WaitMessage>('tollgate:wait')
      try {
        const limiter = new RateLimiter({
          store,
          name: 'jit',
          prefix: uniquePrefix('j'),
          limit: 1,
          window: 100,
          algorithm: 'gcra',
        })
        const first = await limiter.consume('u')
        expect(first.allowed).toBe(true)
        await limiter.wait('u', { jitter: 1, maxWaitMs: 10_000 })
        const [m] = take(
          sub.messages.filter((x) => x.limiter === 'jit'),
          1,
        )
        expect(m.attempts).toBe(2)
        // waitedMs is the planned sleep (retryAfterMs <= 100 here, plus up to 100% of it), not a timing.
        expect(m.waitedMs).toBeGreaterThan(0)
        expect(m.waitedMs).toBeLessThanOrEqual(2 * 100)
        await expect(limiter.wait('u', { jitter: 2 })).rejects.toThrow(/jitter/)
      } finally {
        sub.stop()
      }
    })
  })
})
