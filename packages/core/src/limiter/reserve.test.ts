/**
 * `reserve: N` against real Redis: the options it refuses; a process takes N units per store call and
 * admits from them locally (store calls counted on the `tollgate:store` channel); the units lapse with
 * their window; refund, settle, peek and reset; the edge of the limit; a store outage; and several
 * processes on one hot key never admitting more than the limit.
 */
import dc from 'node:diagnostics_channel'
import { join } from 'node:path'
import {
  clearOfBoundary,
  crossedBoundary,
  type RaceHandle,
  type RedisServerHandle,
  redisUrl,
  sleepAtLeast,
  startRace,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { nodeRedis } from '../../test/clients'
import { ACCOUNT_LIMIT, LIMIT, RESERVE } from '../../test/fixtures/reserve-race-module'
import type { StoreCallContext } from '../events'
import { ConfigError, MemoryStore, RateLimiter, type RateLimiterOptions, RedisStore } from '../index'

const DAY = 86_400_000
const MODULE = join(__dirname, '../../test/fixtures/reserve-race-module.ts')

/**
 * Store calls made by limiters of `prefix`, counted from the tracing channel: `count` per operation, and
 * `events`, the order in which they start (by operation) and the decisions passed to `decided` arrive.
 */
function storeCalls(prefix: string): {
  count(operation?: string): number
  events: string[]
  decided<T>(d: T): T
  stop(): void
} {
  const events: string[] = []
  const fn = (m: unknown) => {
    const ctx = m as StoreCallContext
    if (ctx.prefix === prefix) events.push(ctx.operation)
  }
  dc.subscribe('tracing:tollgate:store:start', fn)
  const calls = () => events.filter((e) => e !== 'decided')
  return {
    count: (operation) => (operation ? calls().filter((o) => o === operation).length : calls().length),
    events,
    decided: (d) => {
      events.push('decided')
      return d
    },
    stop: () => dc.unsubscribe('tracing:tollgate:store:start', fn),
  }
}

describe('reserve', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let store: RedisStore
  const listeners: { stop(): void }[] = []
  beforeAll(async () => {
    client = await nodeRedis()
    store = new RedisStore(client)
  })
  afterEach(() => {
    for (const l of listeners.splice(0)) l.stop()
  })
  afterAll(async () => {
    await client.quit()
  })

  /** A reserved limiter, a plain one on the same keys (it reads what Redis holds), and its store calls. */
  function reserved(options: Partial<RateLimiterOptions> & { reserve: number }) {
    const prefix = uniquePrefix('reserve')
    const policy = { limit: 1000, window: DAY, algorithm: 'fixed-window' as const, ...options }
    const limiter = new RateLimiter({ store, prefix, ...policy })
    const { reserve: _reserve, ...plainPolicy } = policy
    const plain = new RateLimiter({ store, prefix, ...plainPolicy })
    const calls = storeCalls(prefix)
    listeners.push(calls)
    return { limiter, plain, calls }
  }

  describe('options', () => {
    const base = () => ({ store, prefix: uniquePrefix('reserve-opt'), limit: 10, window: '1m' as const })
    const refused = (options: object, option: string, value: unknown) => {
      let error: unknown
      try {
        new RateLimiter({ ...base(), ...options } as RateLimiterOptions)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as ConfigError).option).toBe(option)
      expect((error as ConfigError).received).toBe(value)
      expect((error as Error).message).toContain(`${option} must be`)
    }

    it.each([0, -1, 1.5, 11, Number.NaN, '5'])('refuses reserve %p', (value) => {
      refused({ reserve: value }, 'reserve', value)
    })

    it.each(['gcra', 'token-bucket', 'sliding-log'])('refuses reserve on %s', (algorithm) => {
      refused({ reserve: 2, algorithm }, 'reserve', 2)
    })

    it('refuses reserve on a concurrency policy, in shadow, with a penalty, on some policies only', () => {
      refused({ limit: undefined, window: undefined, concurrency: 5, reserve: 2 }, 'reserve', 2)
      refused({ reserve: 2, shadow: true }, 'reserve', 2)
      refused({ reserve: 2, penalty: { block: '1m' } }, 'reserve', 2)
      const policies = {
        api: { limit: 10, window: '1m', reserve: 2 },
        daily: { limit: 1000, window: '1d' },
      }
      refused({ limit: undefined, window: undefined, policies }, 'policies.daily.reserve', undefined)
      const leased = {
        api: { limit: 10, window: '1m', reserve: 2 },
        jobs: { concurrency: 2, lease: '1m' },
      }
      refused({ limit: undefined, window: undefined, policies: leased }, 'policies.api.reserve', 2)
      const shadowed = { api: { limit: 10, window: '1m', reserve: 2, shadow: true } }
      refused({ limit: undefined, window: undefined, policies: shadowed }, 'policies.api.reserve', 2)
      const concurrent = { jobs: { concurrency: 2, lease: '1m', reserve: 2 } }
      refused({ limit: undefined, window: undefined, policies: concurrent }, 'policies.jobs.reserve', 2)
    })

    it('takes reserve up to the limit, inline or on named policies that all have one', () => {
      expect(() => new RateLimiter({ ...base(), reserve: 10 })).not.toThrow()
      expect(() => new RateLimiter({ ...base(), algorithm: 'fixed-window', reserve: 1 })).not.toThrow()
      const policies = {
        api: { limit: 10, window: '1m' as const, reserve: 3 },
        daily: { limit: 1000, window: '1d' as const, algorithm: 'fixed-window' as const, reserve: 50 },
      }
      expect(() => new RateLimiter({ store, prefix: uniquePrefix('reserve-opt'), policies })).not.toThrow()
    })
  })

  describe.each(['fixed-window', 'sliding-window'] as const)('%s', (algorithm) => {
    beforeEach(() => clearOfBoundary(DAY, 60_000))

    it('takes N units in one store call and admits the next N - 1 calls locally', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, reserve: 10 })
      const first = await limiter.consume('user:1')
      expect(first).toMatchObject({ allowed: true, source: 'reserve', remaining: 999, limit: 1000 })
      expect(calls.count('consume')).toBe(1)
      const remaining: number[] = []
      for (let i = 0; i < 9; i++) {
        const d = await limiter.consume('user:1')
        expect(d).toMatchObject({ allowed: true, source: 'reserve' })
        remaining.push(d.remaining)
      }
      expect(remaining).toEqual([998, 997, 996, 995, 994, 993, 992, 991, 990])
      expect(calls.count('consume')).toBe(1)
      // Redis counts the whole reserve as spent
      expect((await plain.peek('user:1')).remaining).toBe(990)
      const refilled = await limiter.consume('user:1')
      expect(refilled).toMatchObject({ allowed: true, source: 'reserve', remaining: 989 })
      expect(calls.count('consume')).toBe(2)
      expect((await plain.peek('user:1')).remaining).toBe(980)
    })

    it('callers of one key while its refill is in flight await it: one store call per N', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, reserve: 10 })
      const decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.consume('user:2')))
      expect(decisions.every((d) => d.allowed && d.source === 'reserve')).toBe(true)
      expect(calls.count('consume')).toBe(5)
      expect((await plain.peek('user:2')).remaining).toBe(950)
    })

    it('callers waiting on a refill are served in arrival order; a reset meanwhile answers them all', async () => {
      const { limiter, calls } = reserved({ algorithm, reserve: 10 })
      const first = await Promise.all(Array.from({ length: 25 }, () => limiter.consume('user:10')))
      expect(first.map((d) => d.remaining)).toEqual(Array.from({ length: 25 }, (_, i) => 999 - i))
      expect(calls.count('consume')).toBe(3)
      // the reset drops the key's units while a refill is in flight: its waiters move to the new pool
      const pending = Array.from({ length: 25 }, () => limiter.consume('user:11'))
      const reset = limiter.reset('user:11')
      const second = await Promise.all(pending)
      await reset
      expect(second.every((d) => d.allowed && d.source === 'reserve')).toBe(true)
    })

    it('with more callers waiting than units, the next refill goes out before they draw', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, reserve: 10 })
      const pending = Array.from({ length: 15 }, () => limiter.consume('user:13').then(calls.decided))
      const decisions = await Promise.all(pending)
      // the second refill is sent as the first lands, before any caller has its answer
      expect(calls.events.slice(0, 2)).toEqual(['consume', 'consume'])
      expect(calls.count('consume')).toBe(2)
      expect(decisions.map((d) => d.remaining)).toEqual(Array.from({ length: 15 }, (_, i) => 999 - i))
      // no more than one reserve beyond what the callers used: 15 admitted of the 20 taken
      expect((await plain.peek('user:13')).remaining).toBe(980)
      expect((await limiter.peek('user:13')).remaining).toBe(985)
    })

    it("sends no refill ahead within 50 ms of the end of the units' window", async () => {
      // a 40 ms window always ends within 50 ms: its refills wait until the units are gone
      for (let attempt = 1; ; attempt++) {
        await clearOfBoundary(40, 30)
        const startedMs = Date.now()
        const { limiter, calls } = reserved({ algorithm, window: 40, reserve: 10 })
        const decisions = await Promise.all(
          Array.from({ length: 15 }, () => limiter.consume('user:17').then(calls.decided)),
        )
        // a loaded machine can straddle several 40 ms windows in a row: try again, a bounded number of times
        if (crossedBoundary(startedMs, 40) && attempt < 20) continue
        expect(calls.events.slice(0, 2)).toEqual(['consume', 'decided'])
        expect(calls.count('consume')).toBe(2)
        expect(decisions.every((d) => d.allowed && d.source === 'reserve')).toBe(true)
        break
      }
    })

    it("with a store that answers in this process, callers draw the units on hand before the next refill's", async () => {
      const memory = new MemoryStore()
      const prefix = uniquePrefix('reserve-memory')
      const policy = { limit: 1000, window: DAY, algorithm }
      const limiter = new RateLimiter({ store: memory, prefix, ...policy, reserve: 10 })
      const plain = new RateLimiter({ store: memory, prefix, ...policy })
      const decisions = await Promise.all(Array.from({ length: 25 }, () => limiter.consume('user:18')))
      expect(decisions.map((d) => d.remaining)).toEqual(Array.from({ length: 25 }, (_, i) => 999 - i))
      expect(decisions.every((d) => d.source === 'reserve')).toBe(true)
      expect((await plain.peek('user:18')).remaining).toBe(970)
      expect((await limiter.peek('user:18')).remaining).toBe(975)
    })

    it('calls of another cost refill only once the units are gone', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, reserve: 10 })
      const pending = Array.from({ length: 15 }, () =>
        limiter.consume('user:14', { cost: 2 }).then(calls.decided),
      )
      await Promise.all(pending)
      expect(calls.events[1]).toBe('decided')
      expect(calls.count('consume')).toBe(3)
      expect((await plain.peek('user:14')).remaining).toBe(970)
    })

    it('at the edge of the limit, a refill sent ahead and refused leaves the callers what is left', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, limit: 25, reserve: 10 })
      const decisions = await Promise.all(Array.from({ length: 40 }, () => limiter.consume('user:15')))
      expect(decisions.filter((d) => d.allowed)).toHaveLength(25)
      expect(decisions.slice(0, 25).every((d) => d.allowed)).toBe(true)
      expect((await plain.peek('user:15')).remaining).toBe(0)
      // 10, 10 ahead, 10 ahead refused, 10 refused and the 5 left, then 1 refused for every caller after
      expect(calls.count('consume')).toBe(6)
    })

    it('a call made as a refill lands, before the callers waiting draw, queues behind them', async () => {
      const { limiter } = reserved({ algorithm, reserve: 10 })
      let later: Promise<number> | undefined
      const first = Array.from({ length: 15 }, (_, i) => {
        const d = limiter.consume('user:19')
        // the first caller's answer comes as the second refill goes ahead: its next call waits its turn
        if (i === 0) later = d.then(() => limiter.consume('user:19')).then((x) => x.remaining)
        return d.then((x) => x.remaining)
      })
      expect(await Promise.all(first)).toEqual(Array.from({ length: 15 }, (_, i) => 999 - i))
      expect(await later).toBe(984)
    })

    it('a cost it cannot hold, and per-call limits, go to the store', async () => {
      const { limiter, calls } = reserved({ algorithm, reserve: 10 })
      expect(await limiter.consume('user:3', { cost: 11 })).toMatchObject({ source: 'store', remaining: 989 })
      expect(await limiter.consume('user:3', { limits: 2000 })).toMatchObject({ source: 'store' })
      expect(await limiter.consume('user:3', { cost: 10 })).toMatchObject({ source: 'reserve' })
      expect(calls.count('consume')).toBe(3)
    })

    it('a refund goes to the store, in the spend window; once per decision', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, reserve: 10 })
      const d = await limiter.consume('user:4', { cost: 3 })
      expect(d.remaining).toBe(997)
      await limiter.refund(d, { cost: 2 })
      await limiter.refund(d)
      await limiter.refund(d)
      expect(calls.count('refund')).toBe(3)
      // the store holds the 10 units taken less the 3 given back, once
      expect((await plain.peek('user:4')).remaining).toBe(993)
      // the process keeps the 7 units it holds: 7 more draws, then a refill
      for (let i = 0; i < 7; i++) expect(await limiter.consume('user:4')).toMatchObject({ source: 'reserve' })
      expect(calls.count('consume')).toBe(1)
      await limiter.consume('user:4')
      expect(calls.count('consume')).toBe(2)
      expect((await plain.peek('user:4')).remaining).toBe(983)
    })

    it('a settle goes to the store, in the spend window; a refund or settle after it changes nothing', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, reserve: 10 })
      const d = await limiter.consume('user:5', { cost: 5 })
      await limiter.settle(d, 2)
      expect(calls.count('settle')).toBe(1)
      expect((await plain.peek('user:5')).remaining).toBe(993)
      await limiter.refund(d)
      await limiter.settle(d, 0)
      expect((await plain.peek('user:5')).remaining).toBe(993)
      expect((await limiter.consume('user:5', { cost: 5 })).source).toBe('reserve')
      expect(await limiter.consume('user:5')).toMatchObject({ source: 'reserve' })
      expect(calls.count('consume')).toBe(2)
    })

    it('peek counts the units the process holds; reset drops them', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, reserve: 10 })
      await limiter.consume('user:6')
      expect(await limiter.peek('user:6')).toMatchObject({ allowed: true, remaining: 999, source: 'store' })
      expect(await plain.peek('user:6')).toMatchObject({ remaining: 990 })
      await limiter.reset('user:6')
      expect(await limiter.peek('user:6')).toMatchObject({ remaining: 1000 })
      const after = await limiter.consume('user:6')
      expect(after).toMatchObject({ source: 'reserve', remaining: 999 })
      expect(calls.count('consume')).toBe(2)
    })

    it('at the edge of the limit takes what is left once, then refuses from the store', async () => {
      const { limiter, plain, calls } = reserved({ algorithm, limit: 25, reserve: 10 })
      const admitted: boolean[] = []
      for (let i = 0; i < 25; i++) admitted.push((await limiter.consume('user:7')).allowed)
      expect(admitted.every(Boolean)).toBe(true)
      // 10, 10, a refused 10, then the 5 left
      expect(calls.count('consume')).toBe(4)
      expect((await plain.peek('user:7')).remaining).toBe(0)
      const refused = await limiter.consume('user:7')
      expect(refused).toMatchObject({ allowed: false, source: 'store', remaining: 0, cost: 1 })
      expect(refused.retryAfterMs).toBeGreaterThan(0)
      expect(calls.count('consume')).toBe(5)
      expect(await limiter.consume('user:7')).toMatchObject({ allowed: false, source: 'cache' })
      expect(calls.count('consume')).toBe(5)
    })

    it('holds units for at most 10,000 keys: the key refilled longest ago goes first', async () => {
      // a deadline no shared machine misses, and the keys in order, a thousand at a time
      const { limiter, calls } = reserved({ algorithm, reserve: 10, timeoutMs: 30_000 })
      // the first two alone: which of a thousand concurrent calls is answered first is not the point
      await limiter.consume('user:b0')
      await limiter.consume('user:b1')
      for (let from = 2; from < 10_001; from += 1000) {
        const n = Math.min(1000, 10_001 - from)
        await Promise.all(Array.from({ length: n }, (_, i) => limiter.consume(`user:b${from + i}`)))
      }
      expect(calls.count('consume')).toBe(10_001)
      // the last key and the second are still held; the first was pushed out by the last
      expect(await limiter.consume('user:b10000')).toMatchObject({ source: 'reserve', remaining: 998 })
      expect(await limiter.consume('user:b1')).toMatchObject({ source: 'reserve', remaining: 998 })
      expect(calls.count('consume')).toBe(10_001)
      expect(await limiter.consume('user:b0')).toMatchObject({ source: 'reserve', remaining: 989 })
      expect(calls.count('consume')).toBe(10_002)
    })

    it('units lapse at the end of the window they were taken in', async () => {
      const windowMs = 1000
      const { limiter, plain, calls } = reserved({ algorithm, limit: 100, window: windowMs, reserve: 10 })
      await limiter.consume('user:8')
      // past the end of the aligned window the units were taken in (Redis shares this clock)
      await sleepAtLeast(windowMs - (Date.now() % windowMs) + 20)
      const next = await limiter.consume('user:8')
      expect(next).toMatchObject({ allowed: true, source: 'reserve' })
      expect(calls.count('consume')).toBe(2)
      expect((await plain.peek('user:8')).policies[0]!.remaining).toBeLessThan(100)
    })
  })

  describe('several policies', () => {
    beforeEach(() => clearOfBoundary(DAY, 60_000))

    /** Two reserved policies (`daily` with its own limit and reserve), and the same without reserve. */
    function pair(daily: { limit: number; reserve: number }) {
      const prefix = uniquePrefix('reserve-multi')
      const policies = (reserve: boolean) => ({
        burst: {
          limit: 1000,
          window: DAY,
          algorithm: 'fixed-window' as const,
          ...(reserve ? { reserve: 10 } : {}),
        },
        daily: { limit: daily.limit, window: DAY, ...(reserve ? { reserve: daily.reserve } : {}) },
      })
      const limiter = new RateLimiter({ store, prefix, policies: policies(true) })
      const plain = new RateLimiter({ store, prefix, policies: policies(false) })
      const calls = storeCalls(prefix)
      listeners.push(calls)
      const stored = async (key: string) => (await plain.peek(key)).policies.map((p) => p.remaining)
      return { limiter, calls, stored }
    }

    it('one refill takes each policy short of units its own reserve, atomically', async () => {
      const { limiter, calls, stored } = pair({ limit: 5000, reserve: 50 })
      const first = await limiter.consume('user:m1')
      expect(first).toMatchObject({ source: 'reserve', binding: 0, remaining: 999 })
      expect(first.policies.map((p) => p.remaining)).toEqual([999, 4999])
      expect(await stored('user:m1')).toEqual([990, 4950])
      for (let i = 0; i < 9; i++) await limiter.consume('user:m1')
      expect(calls.count('consume')).toBe(1)
      // burst is out of units, daily still holds 40: only burst takes more
      const next = await limiter.consume('user:m1', { cost: { daily: 5 } })
      expect(next.policies.map((p) => p.remaining)).toEqual([989, 4985])
      expect(calls.count('consume')).toBe(2)
      expect(await stored('user:m1')).toEqual([980, 4950])
      await limiter.refund(next)
      expect((await limiter.peek('user:m1')).policies.map((p) => p.remaining)).toEqual([990, 4990])
    })

    it('callers of one key await its refill: one store call per reserve', async () => {
      const { limiter, calls, stored } = pair({ limit: 5000, reserve: 50 })
      const decisions = await Promise.all(Array.from({ length: 30 }, () => limiter.consume('user:m2')))
      expect(decisions.every((d) => d.allowed && d.source === 'reserve')).toBe(true)
      expect(calls.count('consume')).toBe(3)
      expect(await stored('user:m2')).toEqual([970, 4950])
    })

    it('with more callers waiting than units, the next refill goes out first, for the policy short of them', async () => {
      const { limiter, calls, stored } = pair({ limit: 5000, reserve: 50 })
      const decisions = await Promise.all(
        Array.from({ length: 30 }, () => limiter.consume('user:m5').then(calls.decided)),
      )
      expect(calls.events.slice(0, 2)).toEqual(['consume', 'consume'])
      expect(decisions.map((d) => d.policies[0]!.remaining)).toEqual(
        Array.from({ length: 30 }, (_, i) => 999 - i),
      )
      // burst took 10 three times, daily its 50 once: each holds at most its reserve
      expect(calls.count('consume')).toBe(3)
      expect(await stored('user:m5')).toEqual([970, 4950])
      expect((await limiter.peek('user:m5')).policies.map((p) => p.remaining)).toEqual([970, 4970])
    })

    it('at the edge of one policy takes what it has left, then refuses from the store', async () => {
      const { limiter, calls, stored } = pair({ limit: 25, reserve: 10 })
      const admitted: boolean[] = []
      for (let i = 0; i < 25; i++) admitted.push((await limiter.consume('user:m3')).allowed)
      expect(admitted.every(Boolean)).toBe(true)
      expect(calls.count('consume')).toBe(4)
      expect(await stored('user:m3')).toEqual([970, 0])
      const refused = await limiter.consume('user:m3')
      expect(refused).toMatchObject({ allowed: false, source: 'store', cost: 1 })
      expect(refused.policies[refused.binding]!.policy).toBe('daily')
      expect(calls.count('consume')).toBe(5)
    })
  })

  /**
   * Runs `body` with a limiter (`reserve` units, the 'deny' failure policy) on a Redis server of its own,
   * which the test may stop; `prefix` is the limiter's.
   */
  async function onOwnServer(
    reserve: number,
    body: (t: {
      server: RedisServerHandle
      own: { destroy(): void }
      limiter: RateLimiter
      prefix: string
    }) => Promise<void>,
  ): Promise<void> {
    const server = await startRedisServer()
    const own = createClient({ url: server.url, disableOfflineQueue: true })
    own.on('error', () => {})
    await own.connect()
    const prefix = uniquePrefix('reserve-own')
    const limiter = new RateLimiter({
      store: new RedisStore(own),
      prefix,
      limit: 1000,
      window: DAY,
      reserve,
      onStoreError: 'deny',
    })
    try {
      await body({ server, own, limiter, prefix })
    } finally {
      await own.disconnect().catch(() => {})
      await server.stop()
    }
  }

  it('keeps admitting from its units while the store is down, then the failure policy answers', () =>
    onOwnServer(5, async ({ server, limiter }) => {
      await clearOfBoundary(DAY, 60_000)
      expect((await limiter.consume('user:9')).source).toBe('reserve')
      await server.stop()
      const sources: string[] = []
      for (let i = 0; i < 5; i++) sources.push((await limiter.consume('user:9')).source)
      expect(sources).toEqual(['reserve', 'reserve', 'reserve', 'reserve', 'fallback'])
    }))

  it('a refill that fails answers every caller waiting on it, with one store call', () =>
    onOwnServer(5, async ({ server, limiter, prefix }) => {
      const calls = storeCalls(prefix)
      listeners.push(calls)
      await server.stop()
      const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume('user:12')))
      expect(decisions.every((d) => !d.allowed && d.source === 'fallback')).toBe(true)
      expect(calls.count('consume')).toBe(1)
    }))

  it('a refill sent ahead that fails: callers draw the units on hand, the rest get the failure policy', () =>
    onOwnServer(10, async ({ own, limiter, prefix }) => {
      // the connection goes as the second refill (the one ahead) starts
      let started = 0
      const cut = (m: unknown) => {
        if ((m as StoreCallContext).prefix === prefix && ++started === 2) own.destroy()
      }
      dc.subscribe('tracing:tollgate:store:start', cut)
      try {
        const decisions = await Promise.all(Array.from({ length: 15 }, () => limiter.consume('user:16')))
        expect(decisions.slice(0, 10).every((d) => d.allowed && d.source === 'reserve')).toBe(true)
        expect(decisions.slice(10).every((d) => !d.allowed && d.source === 'fallback')).toBe(true)
        expect(started).toBe(2)
      } finally {
        dc.unsubscribe('tracing:tollgate:store:start', cut)
      }
    }))

  describe('across processes', () => {
    let race: RaceHandle
    beforeAll(async () => {
      race = await startRace({ workers: 4, module: MODULE, setupArgs: { url: redisUrl() } })
    }, 60_000)
    afterAll(async () => {
      await race?.close()
    })

    /** Admitted per round, 5 rounds of 100 attempts per process, each round on fresh keys. */
    async function rounds(algorithm: string, multi: boolean): Promise<number[]> {
      const admitted: number[] = []
      for (let round = 0; round < 5; round++) {
        await clearOfBoundary(60_000, 10_000)
        const r = await race.round({ prefix: uniquePrefix('reserve-race'), algorithm, multi }, 100)
        if (r.errors > 0) console.log(r.errorSamples)
        expect(r.errors).toBe(0)
        admitted.push(r.admitted)
      }
      return admitted
    }

    it.each(['fixed-window', 'sliding-window'] as const)(
      '%s: 4 processes on one hot key admit exactly the limit',
      async (algorithm) => {
        expect(await rounds(algorithm, false)).toEqual(new Array(5).fill(LIMIT))
        expect(RESERVE).toBeLessThan(LIMIT)
      },
      60_000,
    )

    it.each(['fixed-window', 'sliding-window'] as const)(
      '%s, two policies: 4 processes never admit more than the smaller limit',
      async (algorithm) => {
        const admitted = await rounds(algorithm, true)
        console.log(`reserve race, two policies, ${algorithm}: admitted per round ${admitted.join(',')}`)
        // units one process holds of a policy while another holds the other policy's may strand
        for (const n of admitted) {
          expect(n).toBeLessThanOrEqual(ACCOUNT_LIMIT)
          expect(n).toBeGreaterThan(0)
        }
      },
      60_000,
    )
  })
})
