/**
 * Blocks and allow entries: written once, applied by the decision scripts of every process on its next
 * call (a lone call, a batch, a call with penalties), with the store's clock; the memory store is the twin.
 */
import { at, type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { monotonicMs } from '../deadlines'
import { type Decision, InputError, MemoryStore, RateLimiter, RedisStore, type Store } from '../index'
import { DenyCache, rememberRefusal } from './deny-cache'

let server: RedisServerHandle
let client: ReturnType<typeof createClient>
let other: ReturnType<typeof createClient>
beforeAll(async () => {
  server = await startRedisServer()
  client = createClient({ url: server.url })
  other = createClient({ url: server.url })
  client.on('error', () => {})
  other.on('error', () => {})
  await Promise.all([client.connect(), other.connect()])
}, 30_000)
afterAll(async () => {
  await client?.quit().catch(() => {})
  await other?.quit().catch(() => {})
  await server?.stop()
})

const HOUR = 3_600_000

describe.each([
  ['RedisStore', () => [new RedisStore(client), new RedisStore(other)]],
  [
    "RedisStore, storage: 'compact'",
    () => [new RedisStore(client, { storage: 'compact' }), new RedisStore(other, { storage: 'compact' })],
  ],
  ['MemoryStore', () => [new MemoryStore()]],
] as const)('blocks and allow entries (%s)', (kind, storesOf: () => readonly Store[]) => {
  // two processes: on Redis two clients; the memory store is one process, its second limiter shares it
  const pair = (options: Record<string, unknown>) => {
    const stores = storesOf()
    const prefix = uniquePrefix('blk')
    const make = (store: Store, more = {}) => new RateLimiter({ store, prefix, ...options, ...more } as never)
    // the other process remembers no refusal: each of its calls shows what the store decides now
    return [make(at(stores, 0)), make(stores[1] ?? at(stores, 0), { denyCache: false })] as const
  }

  it('a block is seen by another process on its next call, refused with its time left, nothing spent', async () => {
    const [a, b] = pair({ limit: 5, window: '1h' })
    await b.consume('203.0.113.9')
    await a.block('203.0.113.9', { for: '1h', reason: 'abuse' })
    const d = await b.consume('203.0.113.9')
    expect(d).toMatchObject({ allowed: false, source: 'block' })
    expect(d.retryAfterMs).toBeGreaterThan(HOUR - 60_000)
    expect(d.retryAfterMs).toBeLessThanOrEqual(HOUR)
    expect((await b.peek('203.0.113.9')).allowed).toBe(false)
    expect(await a.blocks()).toEqual([
      { identity: '203.0.113.9', reason: 'abuse', expiresInMs: expect.any(Number) },
    ])
    expect((await b.consume('198.51.100.1')).allowed).toBe(true) // others are not touched
    await a.unblock('203.0.113.9')
    expect(await a.blocks()).toEqual([])
    const after = await b.consume('203.0.113.9')
    expect(after).toMatchObject({ allowed: true, source: 'store', remaining: 3 }) // the refusals spent nothing
  })

  it('unblock admits at once in the process that cached the refusal', async () => {
    const [a] = pair({ limit: 5, window: '1h', denyCache: { maxMs: 60_000 } })
    await a.block('u', { for: '1h' })
    expect((await a.consume('u')).source).toBe('block')
    expect((await a.consume('u')).source).toBe('cache')
    await a.unblock('u')
    expect(await a.consume('u')).toMatchObject({ allowed: true, source: 'store' })
  })

  it('an allow entry admits without spending, peek unchanged; unallow ends it', async () => {
    const [a, b] = pair({ limit: 1, window: '1h' })
    await a.allow('10.0.0.5', { for: '1d' })
    for (let i = 0; i < 3; i++) {
      const d = await b.consume('10.0.0.5')
      expect(d).toMatchObject({ allowed: true, source: 'allow', remaining: 1 })
      expect(d.refundToken).toBeUndefined()
    }
    expect(await b.peek('10.0.0.5')).toMatchObject({ allowed: true, remaining: 1 })
    await a.unallow('10.0.0.5')
    expect(await b.consume('10.0.0.5')).toMatchObject({ allowed: true, source: 'store', remaining: 0 })
    expect((await b.consume('10.0.0.5')).allowed).toBe(false)
    await a.allow('10.0.0.5', { for: '1h' })
    await a.block('10.0.0.5', { for: '1h' })
    expect((await b.consume('10.0.0.5')).source).toBe('block') // a block wins over an allow entry
  })

  it('multi-policy, multi-identity: a block refuses the whole call; allow needs every identity', async () => {
    const policies = { ip: { limit: 10, window: '1h' }, account: { limit: 2, window: '1h' } }
    const [a, b] = pair({ policies })
    const key = { ip: 'ip:1', account: 'acct:1' }
    await a.block('ip:1', { for: '10m' })
    const d = await b.consume(key)
    expect(d).toMatchObject({ allowed: false, source: 'block' })
    expect(d.policies.map((p) => p.allowed)).toEqual([false, false])
    expect(d.retryAfterMs).toBeGreaterThan(500_000)
    await a.unblock('ip:1')
    await a.allow('ip:1', { for: '1h' })
    expect(await b.consume(key)).toMatchObject({ source: 'store', remaining: 1 }) // the account spends
    await a.allow('acct:1', { for: '1h' })
    expect(await b.consume(key)).toMatchObject({ allowed: true, source: 'allow', remaining: 1 })
  })

  it('calls batched in one turn each get their own identity entries', async () => {
    const [a, b] = pair({ limit: 3, window: '1h' })
    await a.block('bad', { for: '1h' })
    await a.allow('vip', { for: '1h' })
    const ds = await Promise.all(['x', 'bad', 'vip', 'y', 'bad', 'vip'].map((id) => b.consume(id)))
    expect(ds.map((d) => d.source)).toEqual(['store', 'block', 'allow', 'store', 'block', 'allow'])
    expect((await b.peek('vip')).remaining).toBe(3)
  })

  it('a call with a penalty is refused by a block and counts no refusal', async () => {
    const penalty = { after: 1, block: '1h' }
    const [a, b] = pair({ limit: 1, window: '1h', penalty })
    await a.block('p', { for: '1h' })
    expect((await b.consume('p')).source).toBe('block')
    await a.unblock('p')
    expect(await b.consume('p')).toMatchObject({ allowed: true, source: 'store' })
  })

  it('hashed identities (braces, long ones) are blocked under their own hash tag', async () => {
    const [a, b] = pair({ limit: 5, window: '1h' })
    const odd = ['a}{b', 'x'.repeat(300), '~h:forged']
    for (const id of odd) await a.block(id, { for: '1h' })
    for (const id of odd) expect((await b.consume(id)).source).toBe('block')
    expect((await b.consume('a')).source).toBe('store')
    expect((await a.blocks()).map((e) => e.identity).sort()).toEqual([...odd].sort())
  })

  it('refuses bad input before the store', async () => {
    const [a] = pair({ limit: 1, window: '1h' })
    const bad: [string, unknown][] = [
      ['', { for: '1h' }],
      ['x', undefined],
      ['x', {}],
      ['x', { for: 'soon' }],
      ['x', { for: 0 }],
      ['x', { for: '366d' }],
      ['x', { for: '1h', reason: 'r'.repeat(201) }],
      ['x', { for: '1h', reason: 5 }],
      ['x', { for: '1h', until: 5 }],
    ]
    for (const [identity, options] of bad) {
      await expect(a.block(identity, options as never)).rejects.toThrow(InputError)
    }
    await expect(a.allow('x', { for: '1h', reason: 'no' } as never)).rejects.toThrow(InputError)
    await expect(a.blocks({ limit: 0 })).rejects.toThrow(InputError)
    expect((await a.consume('x')).source).toBe('store')
    if (kind === 'RedisStore') expect(await client.keys(`${a.prefix}:*~c*`)).toEqual([])
  })
})

it('the control key lives as long as its entry', async () => {
  const prefix = uniquePrefix('blk')
  const a = new RateLimiter({ store: new RedisStore(client), prefix, limit: 1, window: '1h' })
  await a.block('t', { for: '10m' })
  const ttl = await client.pTTL(`${prefix}:{t}:~c`)
  expect(ttl).toBeGreaterThan(590_000)
  expect(ttl).toBeLessThanOrEqual(600_000)
  await a.allow('t', { for: '1h' })
  expect(await client.pTTL(`${prefix}:{t}:~c`)).toBeGreaterThan(HOUR - 60_000)
  await a.unblock('t')
  await a.unallow('t')
  expect(await client.exists(`${prefix}:{t}:~c`)).toBe(0)
})

it("a block's refusal stays in the deny cache no longer than the policies' shortest window", () => {
  const cache = new DenyCache<Decision>(100, 1 << 20, 600_000)
  const policy = { policy: 'default', key: 'k', algorithm: 'fixed-window', allowed: false, limit: 1 }
  const refusal = (source: Decision['source']) =>
    ({
      allowed: false,
      limit: 1,
      remaining: 0,
      resetMs: HOUR,
      retryAfterMs: HOUR,
      cost: 1,
      binding: 0,
      source,
      policies: [{ ...policy, windowMs: 60_000, remaining: 0, resetMs: HOUR, retryAfterMs: HOUR }],
    }) as Decision
  // the cache sweeps entries ended by the process' own clock when it adds one: times count from it
  const t0 = monotonicMs()
  rememberRefusal(cache, 'blocked', 1, t0, refusal('block'), false)
  rememberRefusal(cache, 'refused', 1, t0, refusal('store'), false)
  expect(cache.get('blocked', 1, t0 + 59_999)).toBeDefined()
  expect(cache.get('blocked', 1, t0 + 60_000)).toBeUndefined()
  expect(cache.get('refused', 1, t0 + 60_000)).toBeDefined() // an ordinary refusal: its retry, up to maxMs
})
