/**
 * Faults are real: each test owns a redis-server it kills, restarts, pauses, flushes, fills or puts to
 * sleep. Bounds asserted here are correctness bounds (no request hangs past its deadline plus a generous
 * margin; limits come back), not performance figures; the figures measured are printed for
 * docs/failure-modes.md.
 */
import net from 'node:net'
import {
  at,
  freePort,
  type RedisServerHandle,
  respCommand,
  sleepAtLeast as sleep,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import Redis from 'ioredis'
import { createClient } from 'redis'
import {
  type Decision,
  RateLimiter,
  type RateLimiterOptions,
  RedisStore,
  type Store,
  type StoreErrorPolicy,
  type TollgateEvent,
} from '../src'

const DEADLINE = 150
// Detects hangs (ioredis' ~10 s offline queue, a client's reconnect loop), not a slow or loaded machine:
// a CI runner's event loop can stall for a second or more while other suites run.
const MARGIN = 4000

type Kind = 'node-redis' | 'ioredis'

interface Client {
  store: Store
  close(): Promise<void>
}

function nodeRedisClient(url: string, connect = true): Client & { ready: Promise<unknown> } {
  const client = createClient({ url, socket: { reconnectStrategy: () => 100 } })
  client.on('error', () => {})
  const ready = connect ? client.connect().catch(() => {}) : Promise.resolve()
  return {
    store: new RedisStore(client),
    ready,
    close: async () => {
      try {
        client.destroy()
      } catch {}
    },
  }
}

function ioredisClient(url: string): Client & { ready: Promise<unknown> } {
  const client = new Redis(url, { retryStrategy: () => 100, lazyConnect: false })
  client.on('error', () => {})
  // Until its first 'ready', calls wait for it within their deadline (never queued): start from it.
  const ready = new Promise<void>((resolve) => client.once('ready', () => resolve()))
  return { store: new RedisStore(client), ready, close: async () => client.disconnect() }
}

const makeClient = (kind: Kind, url: string) =>
  kind === 'ioredis' ? ioredisClient(url) : nodeRedisClient(url)

/** Wraps a store to count the calls that reach it. */
function counting(store: Store): Store & { calls: number } {
  const counted = {
    calls: 0,
    consume: (e: never, c: number) => {
      counted.calls++
      return store.consume(e, c)
    },
    peek: (e: never, c: number) => {
      counted.calls++
      return store.peek(e, c)
    },
    refund: (e: never, t: never, c: number) => {
      counted.calls++
      return store.refund(e, t, c)
    },
    reset: (e: never) => {
      counted.calls++
      return store.reset(e)
    },
    // the connection state the breaker reads, and timeouts reported back (not store calls)
    readySince: () => store.readySince?.(),
    onTimeout: (e: never) => store.onTimeout?.(e),
  }
  return counted as Store & { calls: number }
}

/**
 * Polls until a decision comes from the store again (the breaker's cool-down, then a probe). A loaded CI
 * machine can make a single probe miss a 150 ms deadline; the bound here is generous on purpose.
 */
async function eventuallyFromStore(limiter: RateLimiter, withinMs = 5000): Promise<boolean> {
  const start = performance.now()
  while (performance.now() - start < withinMs) {
    if ((await limiter.peek('probe')).source === 'store') return true
    await sleep(100)
  }
  return false
}

async function timed(call: () => Promise<Decision>): Promise<{ decision: Decision; ms: number }> {
  const start = performance.now()
  const decision = await call()
  return { decision, ms: performance.now() - start }
}

// Windows of a day: these tests span seconds of pauses and restarts, and a count asserted after them must
// not depend on whether a window boundary fell in between (with '1m', a sliding window's single previous
// spend weighs floor(1 x (W - e) / W) = 0 just after a boundary: remaining 5 instead of 4, ~5 % of runs).
describe('Redis faults', () => {
  let server: RedisServerHandle
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled)
    server = await startRedisServer()
  })
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled)
    await server?.stop()
  })
  afterEach(async () => {
    if (!server.running) await server.start()
    expect(unhandled).toEqual([])
  })

  describe.each(['node-redis', 'ioredis'] as const)('%s', (kind) => {
    it.each(['allow', 'deny', 'local'] as const)(
      'kill during traffic (%s): every call answered within the deadline, limits back after restart',
      async (policy: StoreErrorPolicy) => {
        const client = makeClient(kind, server.url)
        await client.ready
        const store = counting(client.store)
        const events: TollgateEvent[] = []
        const limiter = new RateLimiter({
          store,
          prefix: uniquePrefix('kill'),
          limit: 1000,
          window: '1d',
          timeoutMs: DEADLINE,
          onStoreError: policy,
          localShare: 0.5,
          onEvent: (e) => events.push(e),
        })
        const results: { decision: Decision; ms: number; at: number }[] = []
        let restartedAt = 0
        const t0 = performance.now()
        const traffic = (async () => {
          while (performance.now() - t0 < 3500) {
            const r = await timed(() => limiter.consume('client'))
            results.push({ ...r, at: performance.now() })
            await sleep(5)
          }
        })()
        await sleep(300)
        await server.kill()
        await sleep(700)
        await server.start() // empty: no data, no scripts
        restartedAt = performance.now()
        await traffic
        await client.close()

        const during = results.filter((r) => r.decision.source === 'fallback')
        const slowest = Math.max(...results.map((r) => r.ms))
        expect(during.length).toBeGreaterThan(0)
        expect(slowest).toBeLessThan(DEADLINE + MARGIN)
        for (const r of during) {
          if (policy === 'allow') expect(r.decision).toMatchObject({ allowed: true, policies: [] })
          if (policy === 'deny') expect(r.decision.allowed).toBe(false)
          if (policy === 'local') expect(r.decision.policies[0]).toMatchObject({ limit: 500 })
        }
        const back = results.find((r) => r.at > restartedAt && r.decision.source === 'store')
        expect(back).toBeDefined()
        const recoveryMs = back!.at - restartedAt
        expect(recoveryMs).toBeLessThan(2000 + MARGIN)
        // no retry storm: the breaker keeps store calls below requests
        expect(store.calls).toBeLessThanOrEqual(results.length)
        expect(events.some((e) => e.type === 'breaker' && e.state === 'open')).toBe(true)
        expect(events.some((e) => e.type === 'breaker' && e.state === 'closed')).toBe(true)
        console.log(
          `[faults] ${kind} kill/${policy}: ${results.length} calls, ${during.length} from fallback, ` +
            `slowest ${slowest.toFixed(0)} ms (deadline ${DEADLINE}), store calls ${store.calls}, ` +
            `recovered ${recoveryMs.toFixed(0)} ms after restart`,
        )
      },
      20_000,
    )

    it('requests answered by the failure policy during an outage are not charged when Redis returns', async () => {
      const client = makeClient(kind, server.url)
      await client.ready
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('nocharge'),
        limit: 3,
        window: '1d',
        timeoutMs: DEADLINE,
        onStoreError: 'deny',
      })
      expect((await limiter.consume('k')).source).toBe('store')
      await server.kill()
      await sleep(200) // the client notices
      const during = await Promise.all(Array.from({ length: 20 }, () => timed(() => limiter.consume('k'))))
      for (const r of during) expect(r.decision).toMatchObject({ allowed: false, source: 'fallback' })
      await server.start() // empty
      expect(await eventuallyFromStore(limiter)).toBe(true)
      await sleep(300) // anything still queued in the client would have been applied by now
      // a fresh server and no queued spends: the whole quota is there
      expect((await limiter.peek('k')).remaining).toBe(3)
      await client.close()
    }, 15_000)

    it('CLIENT PAUSE: the deadline holds, then service resumes', async () => {
      const client = makeClient(kind, server.url)
      await client.ready
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('pause'),
        limit: 5,
        window: '1d',
        timeoutMs: DEADLINE,
        onStoreError: 'deny',
      })
      expect((await limiter.consume('k')).source).toBe('store')
      await server.command('CLIENT', 'PAUSE', '1200', 'ALL')
      const during = await Promise.all(Array.from({ length: 20 }, () => timed(() => limiter.consume('k'))))
      for (const r of during) {
        expect(r.decision).toMatchObject({ allowed: false, source: 'fallback' })
        expect(r.ms).toBeLessThan(DEADLINE + MARGIN)
      }
      await sleep(1200)
      expect(await eventuallyFromStore(limiter)).toBe(true)
      const after = await limiter.peek('k')
      // The paused calls timed out while the client said it was ready, so the connection was recycled:
      // the server drops a closed connection's postponed commands, and Tollgate never resends them.
      expect(after.remaining).toBe(4)
      await client.close()
    })

    it('DEBUG SLEEP (server busy): the deadline holds and service resumes after', async () => {
      const client = makeClient(kind, server.url)
      await client.ready
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('busy'),
        limit: 5,
        window: '1d',
        timeoutMs: DEADLINE,
      })
      expect((await limiter.consume('k')).source).toBe('store')
      // In-process (a redis-cli spawn can take longer than the sleep below on a loaded machine).
      const sleeping = respCommand(server.port, ['DEBUG', 'SLEEP', '1'], { timeoutMs: 5000 }).catch(() => {})
      await sleep(50)
      const r = await timed(() => limiter.consume('k'))
      expect(r.decision.source).toBe('fallback')
      expect(r.ms).toBeLessThan(DEADLINE + MARGIN)
      await sleeping
      expect(await eventuallyFromStore(limiter)).toBe(true)
      await client.close()
    })

    it('SCRIPT FLUSH mid-traffic: zero errors visible', async () => {
      const client = makeClient(kind, server.url)
      await client.ready
      const events: TollgateEvent[] = []
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('flush'),
        limit: 1_000_000,
        window: '1d',
        onEvent: (e) => events.push(e),
      })
      const decisions: Decision[] = []
      for (let i = 0; i < 20; i++) {
        const batch = Promise.all(Array.from({ length: 25 }, () => limiter.consume('k')))
        if (i % 4 === 0) await server.command('SCRIPT', 'FLUSH')
        decisions.push(...(await batch))
      }
      expect(
        events.map((e) => ('error' in e ? String((e.error as Error).message) : e.type)).slice(0, 3),
      ).toEqual([])
      expect(decisions.every((d) => d.source === 'store' && d.allowed)).toBe(true)
      expect(at(decisions, decisions.length - 1).remaining).toBe(1_000_000 - 500)
      await client.close()
    })
  })

  it.each(['node-redis', 'ioredis'] as const)(
    '%s: boots before Redis exists, then enforces once it starts',
    async (kind) => {
      const port = await freePort()
      const url = `redis://127.0.0.1:${port}`
      const client = makeClient(kind, url) // connect() not awaited: the process boots regardless
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('boot'),
        limit: 4,
        window: '1d',
        timeoutMs: DEADLINE,
        onStoreError: 'deny',
      })
      const early = await timed(() => limiter.consume('k'))
      expect(early.decision).toMatchObject({ allowed: false, source: 'fallback' })
      expect(early.ms).toBeLessThan(DEADLINE + MARGIN)
      const late = await startRedisServer({ port })
      const started = performance.now()
      let d: Decision
      do {
        await sleep(50)
        d = await limiter.consume('k')
      } while (d.source !== 'store' && performance.now() - started < 5000)
      const recoveryMs = performance.now() - started
      console.log(
        `[faults] ${kind} boot-before-redis: enforced ${recoveryMs.toFixed(0)} ms after redis-server started`,
      )
      expect(d.source).toBe('store')
      expect(recoveryMs).toBeLessThan(2000 + MARGIN)
      // The calls that timed out while Redis was down may be applied once the client connects (unknown
      // outcome, never retried): they can only use quota up, never admit more than the limit.
      let admitted = d.allowed ? 1 : 0
      for (let i = 0; i < 6; i++) if ((await limiter.consume('k')).allowed) admitted++
      expect(admitted).toBeGreaterThan(0)
      expect(admitted).toBeLessThanOrEqual(4)
      expect((await limiter.peek('k')).remaining).toBe(0)
      await client.close()
      await late.stop()
    },
    15_000,
  )

  it.each(['node-redis', 'ioredis'] as const)(
    '%s: a server that accepts but never answers: deadline holds, breaker bounds what queues',
    async (kind) => {
      const sockets: net.Socket[] = []
      const blackhole = net.createServer((s) => {
        sockets.push(s)
        s.on('error', () => {})
      })
      await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve))
      const { port } = blackhole.address() as net.AddressInfo
      const client = makeClient(kind, `redis://127.0.0.1:${port}`)
      const store = counting(client.store)
      const limiter = new RateLimiter({
        store,
        prefix: uniquePrefix('hole'),
        limit: 5,
        window: '1d',
        timeoutMs: DEADLINE,
        breaker: { failures: 3, cooldownMs: 200 },
      })
      let slowest = 0
      let requests = 0
      const t0 = performance.now()
      while (performance.now() - t0 < 1500) {
        const batch = await Promise.all(Array.from({ length: 50 }, () => timed(() => limiter.consume('k'))))
        requests += batch.length
        for (const r of batch) {
          expect(r.decision).toMatchObject({ allowed: true, source: 'fallback' })
          slowest = Math.max(slowest, r.ms)
        }
        await sleep(10)
      }
      expect(slowest).toBeLessThan(DEADLINE + MARGIN)
      // Bounded: the first batch (in flight before any failure is seen) and then one probe per cool-down
      // reach the never-answering client; everything else is answered by the failure policy.
      const elapsed = performance.now() - t0
      expect(store.calls).toBeLessThanOrEqual(50 + Math.ceil(elapsed / 200) + 2)
      console.log(
        `[faults] ${kind} blackhole: ${requests} requests, ${store.calls} store calls, slowest ${slowest.toFixed(0)} ms`,
      )
      await client.close()
      for (const s of sockets) s.destroy()
      await new Promise((resolve) => blackhole.close(resolve))
    },
    15_000,
  )

  it('maxmemory with noeviction: writes fail with OOM and take the policy path', async () => {
    const client = nodeRedisClient(server.url)
    await client.ready
    const make = (onStoreError: StoreErrorPolicy) =>
      new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('oom'),
        limit: 5,
        window: '1d',
        onStoreError,
        breaker: { failures: 100 },
      })
    await server.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    await server.command('CONFIG', 'SET', 'maxmemory', '1')
    try {
      const deny = await make('deny').consume('k')
      expect(deny).toMatchObject({ allowed: false, source: 'fallback' })
      const allow = await make('allow').consume('k')
      expect(allow).toMatchObject({ allowed: true, source: 'fallback', policies: [] })
      // peek is a read-only script (flags=no-writes): it still answers from the store under OOM
      expect((await make('deny').peek('k')).source).toBe('store')
      // a two-policy call (every algorithm) under OOM writes nothing at all: the first write is refused
      for (const algorithm of [
        'fixed-window',
        'sliding-window',
        'sliding-log',
        'token-bucket',
        'gcra',
      ] as const) {
        const two = new RateLimiter({
          store: client.store,
          prefix: uniquePrefix('oom2'),
          onStoreError: 'deny',
          breaker: { failures: 100 },
          policies: {
            a: { limit: 5, window: '1d', algorithm },
            b: { limit: 5, window: '1d', algorithm: 'gcra' },
          },
        })
        const d = await two.consume('k')
        expect(d.source).toBe('fallback')
        const after = await two.peek('k')
        expect([after.source, ...after.policies.map((p) => p.remaining)]).toEqual(['store', 5, 5])
      }
    } finally {
      await server.command('CONFIG', 'SET', 'maxmemory', '0')
    }
    expect(await eventuallyFromStore(make('deny'))).toBe(true)
    await client.close()
  })

  const COMPACT = { storage: 'compact', secret: 'faults-secret-0123456' } as const
  it.each([
    ['sliding-window', 'keys', {}],
    ['sliding-window', 'compact', COMPACT],
    ['fixed-window', 'keys', {}],
    ['fixed-window', 'compact', COMPACT],
  ] as const)(
    'maxmemory: one batch of one-pair calls (%s, %s) answers each call alone',
    async (algorithm, _layout, storeOptions) => {
      const raw = createClient({ url: server.url })
      raw.on('error', () => {})
      await raw.connect()
      const limiter = new RateLimiter({
        store: new RedisStore(raw, storeOptions),
        prefix: uniquePrefix('oomrun'),
        limit: 2,
        window: '1d',
        algorithm,
        onStoreError: 'deny',
        denyCache: false,
        breaker: { failures: 100 },
      })
      for (const k of ['full-a', 'full-b', 'full-c']) {
        await limiter.consume(k)
        await limiter.consume(k)
      }
      await server.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
      await server.command('CONFIG', 'SET', 'maxmemory', '1')
      try {
        // one turn: one script, one run; a spend's write is refused (OOM), a refusal writes nothing
        const keys = ['new-a', 'full-a', 'full-b', 'new-b', 'new-c', 'full-c']
        const ds = await Promise.all(keys.map((k) => limiter.consume(k)))
        expect(ds.map((d) => [d.source, d.allowed, d.remaining])).toEqual([
          ['fallback', false, 0],
          ['store', false, 0],
          ['store', false, 0],
          ['fallback', false, 0],
          ['fallback', false, 0],
          ['store', false, 0],
        ])
      } finally {
        await server.command('CONFIG', 'SET', 'maxmemory', '0')
      }
      // nothing of the refused writes stayed: the new keys have their whole limit
      const after = await Promise.all(['new-a', 'new-b', 'new-c', 'full-a'].map((k) => limiter.peek(k)))
      expect(after.map((d) => [d.source, d.remaining])).toEqual([
        ['store', 2],
        ['store', 2],
        ['store', 2],
        ['store', 0],
      ])
      await raw.quit()
    },
  )

  it('maxmemory: one batch of two-pair calls spends on both pairs or on neither', async () => {
    const raw = createClient({ url: server.url })
    raw.on('error', () => {})
    await raw.connect()
    const limiter = new RateLimiter({
      store: new RedisStore(raw),
      prefix: uniquePrefix('oom2'),
      policies: {
        burst: { limit: 2, window: '1d', algorithm: 'sliding-window' },
        daily: { limit: 3, window: '1d', algorithm: 'fixed-window' },
      },
      onStoreError: 'deny',
      denyCache: false,
      breaker: { failures: 100 },
    })
    for (const k of ['full-a', 'full-b']) {
      await limiter.consume(k)
      await limiter.consume(k)
    }
    await server.command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    await server.command('CONFIG', 'SET', 'maxmemory', '1')
    try {
      // one turn: one script, one run of two-pair calls; a spend's writes are refused (OOM), a call
      // refused by its first pair writes nothing
      const keys = ['new-a', 'full-a', 'new-b', 'full-b']
      const ds = await Promise.all(keys.map((k) => limiter.consume(k)))
      expect(ds.map((d) => [d.source, d.allowed])).toEqual([
        ['fallback', false],
        ['store', false],
        ['fallback', false],
        ['store', false],
      ])
    } finally {
      await server.command('CONFIG', 'SET', 'maxmemory', '0')
    }
    // neither pair of a refused write kept anything
    const after = await Promise.all(['new-a', 'new-b', 'full-a'].map((k) => limiter.peek(k)))
    expect(after.map((d) => [d.source, d.policies.map((p) => p.remaining)])).toEqual([
      ['store', [2, 3]],
      ['store', [2, 3]],
      ['store', [0, 1]],
    ])
    await raw.quit()
  })

  it('a key pre-created with the wrong type is repaired, never unlimited', async () => {
    const client = nodeRedisClient(server.url)
    await client.ready
    const raw = createClient({ url: server.url })
    raw.on('error', () => {})
    await raw.connect()
    const cases: [RateLimiterOptions['algorithm'], (key: string) => Promise<unknown>][] = [
      ['fixed-window', (k) => raw.hSet(k, 'x', '1')],
      ['sliding-window', (k) => raw.set(k, 'x')],
      ['sliding-log', (k) => raw.set(k, 'x')],
      ['token-bucket', (k) => raw.rPush(k, 'x')],
      ['gcra', (k) => raw.hSet(k, 'x', '1')],
    ]
    for (const [algorithm, poison] of cases) {
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('type'),
        limit: 2,
        window: '1d',
        algorithm,
        onStoreError: 'allow',
      })
      await poison(at(limiter.keysFor('k'), 0))
      const ds = [await limiter.consume('k'), await limiter.consume('k'), await limiter.consume('k')]
      expect(ds.map((d) => [d.source, d.allowed])).toEqual([
        ['store', true],
        ['store', true],
        ['store', false],
      ])
    }
    await raw.quit()
    await client.close()
  })

  it('deny cache: a refused client costs no store call until its retry time, then is admitted', async () => {
    const client = nodeRedisClient(server.url)
    await client.ready
    const store = counting(client.store)
    const limiter = new RateLimiter({
      store,
      prefix: uniquePrefix('cache'),
      limit: 2,
      window: 400,
      // gcra, not an aligned window: a fixed window's boundary among the first three calls would admit
      // the third.
      algorithm: 'gcra',
    })
    await limiter.consume('k')
    await limiter.consume('k')
    const refused = await limiter.consume('k')
    expect(refused.allowed).toBe(false)
    const callsAfterRefusal = store.calls
    const hammer = await Promise.all(Array.from({ length: 100 }, () => limiter.consume('k')))
    expect(hammer.every((d) => !d.allowed && d.source === 'cache')).toBe(true)
    expect(store.calls).toBe(callsAfterRefusal)
    // a smaller cost than the refused one is not answered from the cache
    expect((await limiter.consume('k', { cost: 0 })).source).toBe('store')
    await sleep(refused.retryAfterMs)
    const again = await limiter.consume('k')
    expect(again).toMatchObject({ allowed: true, source: 'store' })
    // reset clears the cache too
    await limiter.consume('k')
    expect((await limiter.consume('k')).allowed).toBe(false)
    await limiter.reset('k')
    expect((await limiter.consume('k')).allowed).toBe(true)
    await client.close()
  })
})
