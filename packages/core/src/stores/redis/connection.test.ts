/**
 * RedisStore's connection handling against real redis-servers (and a TCP proxy that black-holes
 * established connections): nothing answered by the failure policy is charged later (boot, reconnect,
 * a connection that drops with calls in flight); limits are enforced as soon as the client is ready
 * again; a connection that went silent is recycled; an evicting server is reported once.
 * Assertions are about behaviour (what is charged, where decisions come from); timings are measured in
 * benchmarks/recovery.mts.
 */
import {
  type FaultProxy,
  freePort,
  type RedisServerHandle,
  sleepAtLeast as sleep,
  startFaultProxy,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import Redis from 'ioredis'
import { createClient } from 'redis'
import { type Decision, RateLimiter, RedisStore, type TollgateEvent } from '../../index'

// Day-long windows: no epoch-aligned boundary falls inside a test (at a minute boundary a sliding window
// weighs the spends of the minute before below one whole unit, and a count would read one short).
const WINDOW = '1d'

const DEADLINE = 400 // generous: a loaded CI machine misses tighter deadlines on a healthy connection

type Kind = 'node-redis' | 'ioredis'

interface TestClient {
  raw: any
  store: RedisStore
  close(): void
}

/** A client with its library's default settings (only an 'error' listener, which node-redis requires). */
function open(kind: Kind, url: string, options?: { onEvent?: (e: TollgateEvent) => void }): TestClient {
  if (kind === 'ioredis') {
    const client = new Redis(url)
    client.on('error', () => {})
    return { raw: client, store: new RedisStore(client, options), close: () => client.disconnect() }
  }
  const client = createClient({ url })
  client.on('error', () => {})
  client.connect().catch(() => {})
  return {
    raw: client,
    store: new RedisStore(client, options),
    close: () => {
      try {
        client.destroy()
      } catch {}
    },
  }
}

const readyEvent = (c: TestClient) => new Promise<void>((resolve) => c.raw.once('ready', () => resolve()))

/** Calls `consume` every 20 ms until a decision comes from the store, for at most `withinMs`. */
async function untilFromStore(limiter: RateLimiter, key: string, withinMs: number): Promise<Decision[]> {
  const decisions: Decision[] = []
  const start = performance.now()
  while (performance.now() - start < withinMs) {
    const d = await limiter.consume(key)
    decisions.push(d)
    if (d.source === 'store') break
    await sleep(20)
  }
  return decisions
}

describe.each(['node-redis', 'ioredis'] as const)('%s connection handling', (kind) => {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  beforeAll(() => process.on('unhandledRejection', onUnhandled))
  afterAll(() => process.off('unhandledRejection', onUnhandled))
  afterEach(() => expect(unhandled).toEqual([]))

  it('boot with Redis down: calls answered by the failure policy are never charged once it starts', async () => {
    const port = await freePort()
    const client = open(kind, `redis://127.0.0.1:${port}`)
    const limiter = new RateLimiter({
      store: client.store,
      prefix: uniquePrefix('boot'),
      limit: 4,
      window: WINDOW,
      timeoutMs: DEADLINE,
      onStoreError: 'deny',
    })
    const early = await Promise.all([limiter.consume('k'), limiter.consume('k'), limiter.consume('k')])
    for (const d of early) expect(d).toMatchObject({ allowed: false, source: 'fallback' })
    const ready = readyEvent(client)
    const server = await startRedisServer({ port })
    try {
      await ready
      await sleep(300) // a call still queued in the client would have been applied by now
      let after = await limiter.peek('k')
      for (let i = 0; i < 100 && after.source !== 'store'; i++) {
        await sleep(50) // (the breaker the boot opened)
        after = await limiter.peek('k')
      }
      expect(after.source).toBe('store')
      expect(after.remaining).toBe(4)
    } finally {
      client.close()
      await server.stop()
    }
  }, 20_000)

  describe('through a proxy', () => {
    let server: RedisServerHandle
    let proxy: FaultProxy
    beforeEach(async () => {
      server = await startRedisServer()
      proxy = await startFaultProxy(server.port)
    })
    afterEach(async () => {
      await proxy.close()
      await server.stop()
    })

    it('a connection that drops with calls in flight: those calls are not sent again on reconnect', async () => {
      const client = open(kind, proxy.url)
      await readyEvent(client)
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('inflight'),
        limit: 5,
        window: WINDOW,
        timeoutMs: DEADLINE,
        onStoreError: 'deny',
        breaker: { failures: 100 },
      })
      expect((await limiter.consume('k')).source).toBe('store')
      proxy.blackhole()
      // Two calls go into the hole and are answered by the failure policy at the deadline (fewer than
      // the three in a row that would make Tollgate recycle the connection itself).
      const lost = await Promise.all([limiter.consume('k'), limiter.consume('k')])
      for (const d of lost) expect(d).toMatchObject({ allowed: false, source: 'fallback' })
      const ready = readyEvent(client)
      proxy.cut() // the client sees its connection close, with those two calls unanswered
      await ready
      await sleep(300)
      const after = await limiter.peek('k')
      expect(after.source).toBe('store')
      expect(after.remaining).toBe(4)
      client.close()
    }, 20_000)

    it('a half-open connection (established one black-holed, new ones work) is recycled; nothing answered meanwhile is charged', async () => {
      const client = open(kind, proxy.url)
      await readyEvent(client)
      // Calls that time out on the new connection (a loaded machine) have an unknown outcome: counted.
      let lateTimeouts = 0
      const limiter = new RateLimiter({
        store: client.store,
        prefix: uniquePrefix('halfopen'),
        limit: 5,
        window: WINDOW,
        timeoutMs: DEADLINE,
        onStoreError: 'deny',
        onEvent: (e) => {
          if (e.type === 'timeout' && proxy.accepted >= 2) lateTimeouts++
        },
      })
      expect((await limiter.consume('k')).source).toBe('store')
      expect(proxy.accepted).toBe(1)
      proxy.blackhole()
      const decisions = await untilFromStore(limiter, 'k', 10_000)
      const last = decisions[decisions.length - 1]
      const during = decisions.filter((d) => d.source === 'fallback')
      expect(during.length).toBeGreaterThan(0)
      for (const d of during) expect(d.allowed).toBe(false)
      expect(last).toMatchObject({ source: 'store', allowed: true })
      expect(proxy.accepted).toBeGreaterThanOrEqual(2) // a new connection
      // one spend before the hole, one after: the refused calls in between cost nothing (the black-holed
      // ones in particular are never resent on the new connection)
      const remaining = (await limiter.peek('k')).remaining
      expect(remaining).toBeLessThanOrEqual(3)
      expect(remaining).toBeGreaterThanOrEqual(3 - lateTimeouts)
      console.log(`[connection] ${kind} half-open: ${during.length} fallback answers before recovery`)
      client.close()
    }, 30_000)
  })

  it('after a restart the limit is enforced as soon as the client is ready, not after the cool-down', async () => {
    const server = await startRedisServer()
    const client = open(kind, server.url)
    await readyEvent(client)
    const limiter = new RateLimiter({
      store: client.store,
      prefix: uniquePrefix('restart'),
      limit: 5,
      window: WINDOW,
      timeoutMs: DEADLINE,
      onStoreError: 'deny',
      breaker: { failures: 3, cooldownMs: 60_000 },
    })
    try {
      expect((await limiter.consume('warm')).source).toBe('store')
      await server.kill()
      // Let the client see the drop first: node-redis writes once per event-loop turn, and a call queued
      // in the turn the connection died is written after the reconnect (documented gap).
      await sleep(200)
      for (let i = 0; i < 5; i++) await limiter.consume('during')
      expect(limiter.breaker.state).toBe('open')
      const ready = readyEvent(client)
      await server.start() // empty: no data, no scripts
      await ready
      const after: Decision[] = []
      for (let i = 0; i < 6; i++) after.push(await limiter.consume('fresh'))
      expect(after.map((d) => [d.source, d.allowed])).toEqual([
        ['store', true],
        ['store', true],
        ['store', true],
        ['store', true],
        ['store', true],
        ['store', false],
      ])
      // nothing refused during the outage was charged on the new server
      expect((await limiter.peek('during')).remaining).toBe(5)
    } finally {
      client.close()
      await server.stop()
    }
  }, 20_000)

  describe('eviction policy', () => {
    let warn: jest.SpyInstance
    beforeEach(() => {
      warn = jest.spyOn(console, 'warn').mockImplementation(() => {})
    })
    afterEach(() => warn.mockRestore())

    const warnings = () =>
      warn.mock.calls.filter((c) => String(c[0]).includes('WARN_TOLLGATE_EVICTION_POLICY')).length

    it.each([
      ['allkeys-lru', true],
      ['volatile-ttl', true],
      ['noeviction', false],
    ] as const)(
      'maxmemory-policy %s: reported once per client = %s, with one CONFIG GET per connection',
      async (policy, expected) => {
        const server = await startRedisServer({ args: ['--maxmemory', '64mb', '--maxmemory-policy', policy] })
        const events: TollgateEvent[] = []
        const client = open(kind, server.url, { onEvent: (e) => events.push(e) })
        try {
          await readyEvent(client)
          const limiter = new RateLimiter({
            store: client.store,
            prefix: uniquePrefix('evict'),
            limit: 100,
            window: WINDOW,
          })
          // a second store on the same client shares its connection watch: no second check, no second warning
          const other = new RateLimiter({
            store: new RedisStore(client.raw),
            prefix: uniquePrefix('evict'),
            limit: 100,
            window: WINDOW,
          })
          for (let i = 0; i < 10; i++) {
            expect((await limiter.consume('k')).source).toBe('store')
            expect((await other.consume('k')).source).toBe('store')
          }
          const stats = await server.command('INFO', 'commandstats')
          // the check is one command per connection, never one per request
          expect(Number(/cmdstat_config\|get:calls=(\d+)/.exec(stats)?.[1] ?? 0)).toBe(1)
          if (expected) {
            expect(events).toEqual([{ type: 'eviction-policy', policy, maxmemory: 64 * 1024 * 1024 }])
            expect(warnings()).toBe(1)
          } else {
            expect(events).toEqual([])
            expect(warnings()).toBe(0)
          }
        } finally {
          client.close()
          await server.stop()
        }
      },
    )

    it('a server that refuses CONFIG (renamed, as on managed Redis): no warning, calls unaffected', async () => {
      const server = await startRedisServer({
        args: ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru', '--rename-command', 'CONFIG', ''],
      })
      const events: TollgateEvent[] = []
      const client = open(kind, server.url, { onEvent: (e) => events.push(e) })
      try {
        await readyEvent(client)
        const limiter = new RateLimiter({
          store: client.store,
          prefix: uniquePrefix('evict'),
          limit: 2,
          window: WINDOW,
        })
        const ds = [await limiter.consume('k'), await limiter.consume('k'), await limiter.consume('k')]
        expect(ds.map((d) => [d.source, d.allowed])).toEqual([
          ['store', true],
          ['store', true],
          ['store', false],
        ])
        expect(events).toEqual([])
        expect(warnings()).toBe(0)
      } finally {
        client.close()
        await server.stop()
      }
    })
  })
})
