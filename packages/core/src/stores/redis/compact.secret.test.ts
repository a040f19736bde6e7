/**
 * `storage: 'compact'` with no `secret`: each prefix's secret kept in Redis at `<prefix>:{~h:s}`, against
 * real servers. Stores without one agree on it and count together; it is written once, written back after
 * a flush by the next check, adopted when another is found; a configured secret and a kept one on one
 * prefix refuse each other; and on a 3-node cluster it is one single-key script.
 */
import {
  at,
  clearOfBoundary,
  type RedisClusterHandle,
  type RedisServerHandle,
  redisUrl,
  startRedisCluster,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { clusterClient } from '../../../test/cluster-clients'
import type { TollgateEvent } from '../../events'
import { ConfigError, RateLimiter, RedisStore, StoreError } from '../../index'
import { identityTag } from '../../keys'
import type { ResolvedPolicy } from '../../types'
import { CompactLayout, compactSpot } from './compact'

const DAY = 86_400_000
const POLICY: ResolvedPolicy = { name: 'default', algorithm: 'fixed-window', limit: 1, windowMs: 1, burst: 1 }
const open = (url: string) => createClient({ url })
type Client = ReturnType<typeof open>

const clients: Client[] = []
/** A connected client of its own: each stands for another process. */
async function connect(url = redisUrl()): Promise<Client> {
  const c = open(url)
  c.on('error', () => {})
  await c.connect()
  clients.push(c)
  return c
}
const closeAll = () => Promise.all(clients.splice(0).map((c) => c.quit().catch(() => c.destroy())))
afterAll(closeAll)

const kept = (client: Client) => new RedisStore(client, { storage: 'compact' })

/** Where a secret places a limiter's identity: its first level's key and its field. */
function placed(limiter: RateLimiter, identity: string, secret: string): { level: string; field: string } {
  const key = at(
    new CompactLayout(secret).map([{ policy: POLICY, key: at(limiter.keysFor(identity), 0) }]),
    0,
  ).key
  return { level: key.slice(0, -10), field: key.slice(-9) }
}

/** A store's standing with a prefix: `due` set to 0 makes its next call check again, beside it. */
function standing(store: RedisStore, prefix: string): { due: number; pending: Promise<void> | undefined } {
  const layout = (
    store as unknown as { layout: { prefixes: Map<string, { due: number; pending: undefined }> } }
  ).layout
  return layout.prefixes.get(prefix)!
}

/** One call of `limiter` that also runs its store's check of the prefix; resolves once both are done. */
async function recheck(limiter: RateLimiter, store: RedisStore, prefix: string): Promise<void> {
  const s = standing(store, prefix)
  s.due = 0
  await limiter.peek('someone-else')
  await s.pending
}

const options = (prefix: string, limit = 5) =>
  ({ prefix, limit, window: '1d', algorithm: 'fixed-window', onStoreError: 'deny' }) as const

describe('storage: compact with no secret', () => {
  it('four stores racing on a fresh prefix agree on one secret, one field per identity, exactly the limit', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('ks')
    const limiters = await Promise.all(
      [0, 1, 2, 3].map(async () => new RateLimiter({ store: kept(await connect()), ...options(prefix, 7) })),
    )
    // each store's first call waits for the secret's read: 4 x 25 calls racing on 'x', none before it
    const decisions = await Promise.all(
      limiters.flatMap((l) => Array.from({ length: 25 }, () => l.consume('x'))),
    )
    expect(decisions.filter((d) => d.allowed)).toHaveLength(7)
    expect(decisions.every((d) => d.source !== 'fallback')).toBe(true)
    const secret = (await (await connect()).get(`${prefix}:{~h:s}`))!
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    // every store placed 'x' where that secret does: one field holds the 7
    const { level, field } = placed(at(limiters, 0), 'x', secret)
    const c = await connect()
    expect(await c.hGet(level, field)).toBe('7')
    expect(level).toBe(`${prefix}:{~h:c${compactSpot(secret, identityTag('x')).bucket}}:fw-1d`)
    expect(field).toBe(compactSpot(secret, identityTag('x')).field)
    for (const l of limiters) expect((await l.peek('x')).remaining).toBe(0)
  })

  it('writes the secret once, with no expiry; a later store reads it and counts with the first', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('ks1')
    const c = await connect()
    const one = new RateLimiter({ store: kept(await connect()), ...options(prefix) })
    // a reset as the very first call is placed once the secret is read, like any call
    await one.reset('x')
    await one.consume('x', { cost: 2 })
    const secret = await c.get(`${prefix}:{~h:s}`)
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(await c.pTTL(`${prefix}:{~h:s}`)).toBe(-1)
    const two = new RateLimiter({ store: kept(await connect()), ...options(prefix) })
    expect((await two.consume('x')).remaining).toBe(2)
    expect(await c.get(`${prefix}:{~h:s}`)).toBe(secret)
    const { level, field } = placed(one, 'x', secret!)
    expect(await c.hGet(level, field)).toBe('3')
    // other prefixes have secrets of their own
    const other = new RateLimiter({ store: kept(await connect()), ...options(uniquePrefix('ks1')) })
    await other.consume('x')
    expect(await c.get(`${other.prefix}:{~h:s}`)).not.toBe(secret)
  })

  it('a store that finds another secret adopts it: its later calls count where that secret places them', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('ksa')
    const c = await connect()
    const store = kept(await connect())
    const limiter = new RateLimiter({ store, ...options(prefix) })
    await limiter.consume('x', { cost: 3 })
    const before = (await c.get(`${prefix}:{~h:s}`))!
    // a process that read first after a flush wrote a fresh secret: this store adopts it
    const fresh = 'A'.repeat(43)
    await c.set(`${prefix}:{~h:s}`, fresh)
    await recheck(limiter, store, prefix)
    expect((await limiter.consume('x')).remaining).toBe(4) // counted afresh where the new secret puts it
    expect(await c.hGet(placed(limiter, 'x', fresh).level, placed(limiter, 'x', fresh).field)).toBe('1')
    expect(await c.hGet(placed(limiter, 'x', before).level, placed(limiter, 'x', before).field)).toBe('3')
    expect(await c.get(`${prefix}:{~h:s}`)).toBe(fresh)
  })

  it('a configured secret and a kept one on one prefix refuse each other, loudly, never logging the secret', async () => {
    await clearOfBoundary(DAY, 60_000)
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {})
    try {
      for (const first of ['kept', 'configured'] as const) {
        const prefix = uniquePrefix(`kmix-${first}`)
        const events: TollgateEvent[] = []
        const make = async (mode: 'kept' | 'configured', onEvent?: (e: TollgateEvent) => void) =>
          new RateLimiter({
            store: new RedisStore(await connect(), {
              storage: 'compact',
              ...(mode === 'configured' ? { secret: 'a-configured-secret-0123' } : {}),
            }),
            ...options(prefix),
            ...(onEvent ? { onEvent } : {}),
          })
        const one = await make(first)
        const later = await make(first === 'kept' ? 'configured' : 'kept', (e) => events.push(e))
        expect((await one.consume('x')).allowed).toBe(true)
        // the later one is refused: the failure policy answers ('deny'), a StoreError names the prefix
        for (let i = 0; i < 3; i++)
          expect(await later.consume('x')).toMatchObject({ allowed: false, source: 'fallback' })
        const event = events.find((e) => e.type === 'store-error') as { error: Error } | undefined
        expect(event).toMatchObject({ prefix })
        expect(event!.error).toBeInstanceOf(StoreError)
        const found =
          first === 'kept'
            ? 'a secret kept there by stores given no `secret`'
            : 'the fingerprint of a configured `secret`'
        expect(event!.error.message).toContain(
          `storage: 'compact' on prefix '${prefix}': Redis holds ${found}`,
        )
        expect(event!.error.message).toContain('Give every process on this prefix the same secret, or none')
        // the first keeps counting
        expect((await one.consume('x')).remaining).toBe(3)
        const held = (await (await connect()).get(`${prefix}:{~h:s}`))!
        expect(held).toMatch(first === 'kept' ? /^[A-Za-z0-9_-]{43}$/ : /^[0-9a-f]{16}$/)
        const said = warn.mock.calls.map((call) => call.join(' ')).filter((line) => line.includes(prefix))
        expect(said).toHaveLength(1) // once per prefix, with its code
        expect(at(said, 0)).toContain('ERR_TOLLGATE_COMPACT_SECRET')
        expect(at(said, 0)).not.toContain(held)
      }
    } finally {
      warn.mockRestore()
    }
  })

  it('a configured secret is still checked; none is not asked for', async () => {
    const client = await connect()
    expect(() => new RedisStore(client, { storage: 'compact' })).not.toThrow()
    expect(() => new RedisStore(client, { storage: 'compact', secret: 'short' })).toThrow(ConfigError)
    expect(() => new RedisStore(client, { storage: 'compact', secret: 'short' })).toThrow(/^secret must be/)
    expect(() => compactSpot(undefined as never, 'x')).toThrow(ConfigError)
  })
})

describe('storage: compact with no secret, after FLUSHALL (a server of its own)', () => {
  let server: RedisServerHandle
  beforeAll(async () => {
    server = await startRedisServer()
  }, 60_000)
  afterAll(async () => {
    await closeAll() // its clients first: they would try to reconnect to a stopped server
    await server?.stop()
  })

  it('the next check writes back the secret every store already uses, so nothing moves', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('kflush')
    const c = await connect(server.url)
    const store = kept(await connect(server.url))
    const one = new RateLimiter({ store, ...options(prefix) })
    await one.consume('x')
    const secret = await c.get(`${prefix}:{~h:s}`)
    await c.flushAll()
    await recheck(one, store, prefix)
    expect(await c.get(`${prefix}:{~h:s}`)).toBe(secret)
    // a store started after the flush reads that secret and counts with the first
    const two = new RateLimiter({ store: kept(await connect(server.url)), ...options(prefix) })
    await one.consume('x')
    expect((await two.consume('x')).remaining).toBe(3)
  })
})

describe('storage: compact with no secret, on a 3-node cluster', () => {
  let cluster: RedisClusterHandle
  beforeAll(async () => {
    cluster = await startRedisCluster({ primaries: 3 })
  }, 60_000)
  afterAll(async () => {
    await cluster?.stop()
  })

  it('stores on two client kinds agree on the secret and admit exactly the limit', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('kcl')
    const a = await clusterClient('node-redis', cluster, { storage: 'compact' })
    const b = await clusterClient('ioredis', cluster, { storage: 'compact' })
    try {
      const limiters = [a, b].map((c) => new RateLimiter({ store: c.store, ...options(prefix, 6) }))
      const ids = ['x', 'y', 'z']
      const decisions = await Promise.all(
        limiters.flatMap((l) => ids.flatMap((id) => Array.from({ length: 8 }, () => l.consume(id)))),
      )
      expect(decisions.every((d) => d.source !== 'fallback')).toBe(true)
      for (const id of ids) {
        const mine = decisions.filter((d, i) => at(ids, Math.floor(i / 8) % 3) === id && d.allowed)
        expect(mine).toHaveLength(6)
      }
      expect(await a.exists(`${prefix}:{~h:s}`)).toBe(true)
    } finally {
      await a.close()
      await b.close()
    }
  }, 60_000)
})
