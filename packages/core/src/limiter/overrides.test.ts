/**
 * Per-identity overrides: set once, applied by the decision scripts of every process on its next call (a
 * lone call, a batch, several policies, a call with penalties), shown in the decision and by peek, given
 * back under the limit spent under; bounded and checked before the store. The memory store is the twin.
 */
import { at, type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { InputError, MemoryStore, RateLimiter, RedisStore, type Store } from '../index'
import { MAX_OVERRIDES } from '../overrides'

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

const DAY = 86_400_000

describe.each([
  ['RedisStore', () => [new RedisStore(client), new RedisStore(other)]],
  [
    "RedisStore, storage: 'compact'",
    () => [new RedisStore(client, { storage: 'compact' }), new RedisStore(other, { storage: 'compact' })],
  ],
  ['MemoryStore', () => [new MemoryStore()]],
] as const)('overrides (%s)', (_kind, storesOf: () => readonly Store[]) => {
  // two processes: on Redis two clients; the memory store is one process, its second limiter shares it
  const pair = (options: Record<string, unknown>) => {
    const stores = storesOf()
    const prefix = uniquePrefix('ovr')
    const make = (store: Store, more = {}) => new RateLimiter({ store, prefix, ...options, ...more } as never)
    return [make(at(stores, 0)), make(stores[1] ?? at(stores, 0), { denyCache: false })] as const
  }
  const plans = {
    policies: {
      rate: { limit: 5, window: '1h' },
      monthly: { limit: 3, window: { calendar: 'month', timeZone: 'Europe/Berlin' } },
    },
  }

  it('an override is applied by another process on its next call, shown in the decision and by peek', async () => {
    const [a, b] = pair(plans)
    for (let i = 0; i < 3; i++) expect((await b.consume('tenant:acme')).allowed).toBe(true)
    expect(await b.consume('tenant:acme')).toMatchObject({ allowed: false, limit: 3 })
    await a.overrides.set('tenant:acme', { monthly: { limit: 500 } }, { ttl: '30d' })
    const d = await b.consume('tenant:acme')
    expect(d.allowed).toBe(true)
    const monthly = d.policies.find((p) => p.policy === 'monthly')!
    expect(monthly).toMatchObject({ limit: 500, remaining: 496 })
    expect(d.policies.find((p) => p.policy === 'rate')).toMatchObject({ limit: 5, remaining: 1 })
    const peek = await b.peek('tenant:acme')
    expect(peek.policies.find((p) => p.policy === 'monthly')).toMatchObject({ limit: 500, remaining: 496 })
    // another identity keeps the policy's own limit
    expect((await b.consume('tenant:other')).policies[1]).toMatchObject({ limit: 3, remaining: 2 })
    expect(await a.overrides.get('tenant:acme')).toEqual({ monthly: { limit: 500 } })
    expect(await b.overrides.get('tenant:other')).toBeUndefined()
    const listed = await b.overrides.list()
    expect(listed).toEqual([
      { identity: 'tenant:acme', limits: { monthly: { limit: 500 } }, expiresInMs: expect.any(Number) },
    ])
    expect(listed[0]!.expiresInMs).toBeGreaterThan(29 * DAY)
    expect(listed[0]!.expiresInMs).toBeLessThanOrEqual(30 * DAY)
    await a.overrides.delete('tenant:acme')
    expect(await b.consume('tenant:acme')).toMatchObject({ allowed: false })
    expect(await b.overrides.get('tenant:acme')).toBeUndefined()
    expect(await b.overrides.list()).toEqual([])
  })

  it('a lowered limit refuses, and the headers number (decision.limit) is the override', async () => {
    const [a, b] = pair({ limit: 10, window: '1h' })
    await a.overrides.set('k', { limit: 2 })
    expect(await b.consume('k')).toMatchObject({ allowed: true, limit: 2, remaining: 1 })
    expect(await b.consume('k')).toMatchObject({ allowed: true, limit: 2, remaining: 0 })
    expect(await b.consume('k')).toMatchObject({ allowed: false, limit: 2, remaining: 0 })
    expect(await a.overrides.list()).toEqual([{ identity: 'k', limits: { limit: 2 }, expiresInMs: Infinity }])
  })

  it.each(['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra'] as const)(
    '%s: admits exactly the override in one window, calls batched in one turn',
    async (algorithm) => {
      const [a, b] = pair({ limit: 4, window: '1h', algorithm })
      await a.overrides.set('k', { limit: 7 })
      const decisions = await Promise.all(Array.from({ length: 12 }, () => b.consume('k')))
      expect(decisions.filter((d) => d.allowed)).toHaveLength(7)
      expect(decisions.every((d) => d.limit === 7)).toBe(true)
    },
  )

  it('a refund is given back under the limit it was spent under', async () => {
    const [a, b] = pair({ limit: 10, window: '1h', algorithm: 'token-bucket' })
    await a.overrides.set('k', { limit: 3 })
    const first = await b.consume('k')
    await b.consume('k')
    await b.refund(first)
    expect(await b.peek('k')).toMatchObject({ limit: 3, remaining: 2 })
    // a refund never lifts the bucket past the overridden capacity
    const d = await b.consume('k', { cost: 2 })
    expect(d).toMatchObject({ allowed: true, remaining: 0 })
    await b.refund(d)
    await b.refund(d)
    expect(await b.peek('k')).toMatchObject({ remaining: 2 })
  })

  it("a refund never lifts a bucket past the override's capacity", async () => {
    // 10 a second (a token each 100 ms) by policy, 3 by override: after 250 ms the bucket is full again
    const [a, b] = pair({ limit: 10, window: 1000, algorithm: 'token-bucket' })
    await a.overrides.set('k', { limit: 3 })
    const d = await b.consume('k')
    expect(d).toMatchObject({ limit: 3, remaining: 2 })
    await new Promise((r) => setTimeout(r, 1100))
    await b.refund(d)
    expect(await b.peek('k')).toMatchObject({ limit: 3, remaining: 3 })
  })

  it('several policies in calls batched in one turn', async () => {
    const [a, b] = pair(plans)
    await a.overrides.set('tenant:acme', { monthly: { limit: 4 }, rate: { limit: 9 } })
    const ds = await Promise.all(Array.from({ length: 6 }, () => b.consume('tenant:acme')))
    expect(ds.filter((d) => d.allowed)).toHaveLength(4)
    expect(ds[0]!.policies.map((p) => p.limit)).toEqual([9, 4])
  })

  it('an override with an end ends; one without has none', async () => {
    const [a, b] = pair({ limit: 1, window: '1h' })
    await a.overrides.set('k', { limit: 3 }, { ttl: 150 })
    expect(await b.consume('k')).toMatchObject({ limit: 3 })
    await new Promise((r) => setTimeout(r, 300))
    expect(await b.consume('k')).toMatchObject({ allowed: false, limit: 1 })
    expect(await a.overrides.get('k')).toBeUndefined()
    expect(await a.overrides.list()).toEqual([])
  })

  it('an override and a block on one identity: the block refuses, the override shows', async () => {
    const [a, b] = pair({ limit: 1, window: '1h' })
    await a.overrides.set('k', { limit: 3 })
    await a.block('k', { for: '1h' })
    expect(await b.consume('k')).toMatchObject({ allowed: false, source: 'block' })
    await a.unblock('k')
    expect(await b.consume('k')).toMatchObject({ allowed: true, limit: 3, remaining: 2 })
    expect(await a.overrides.get('k')).toEqual({ limit: 3 })
  })

  it('a change of overrides drops the refusals this process remembered', async () => {
    const [a] = pair({ limit: 1, window: '1h', denyCache: { maxMs: 60_000 } })
    await a.consume('k')
    expect((await a.consume('k')).source).toBe('store')
    expect((await a.consume('k')).source).toBe('cache')
    await a.overrides.set('k', { limit: 5 })
    expect(await a.consume('k')).toMatchObject({ allowed: true, source: 'store', limit: 5 })
  })

  it('refuses bad input before the store', async () => {
    const [a] = pair(plans)
    const bad: [string, () => Promise<unknown>][] = [
      ['limits.nope', () => a.overrides.set('k', { nope: { limit: 1 } })],
      ['limits.monthly.limit', () => a.overrides.set('k', { monthly: { limit: 0 } })],
      ['limits.monthly.limit', () => a.overrides.set('k', { monthly: { limit: 1.5 } })],
      ['limits.monthly', () => a.overrides.set('k', { monthly: { limit: 1, window: '1d' } as never })],
      ['limits', () => a.overrides.set('k', {})],
      ['limits', () => a.overrides.set('k', 5 as never)],
      ['ttl', () => a.overrides.set('k', { rate: { limit: 2 } }, { ttl: 'soon' })],
      ['ttl', () => a.overrides.set('k', { rate: { limit: 2 } }, { ttl: '400d' })],
      ['override options', () => a.overrides.set('k', { rate: { limit: 2 } }, { for: '1d' } as never)],
      ['identity', () => a.overrides.set('', { rate: { limit: 2 } })],
      ['identity', () => a.overrides.get('x'.repeat(2000))],
      ['limit', () => a.overrides.list({ limit: 0 })],
    ]
    for (const [argument, call] of bad) {
      await expect(call()).rejects.toBeInstanceOf(InputError)
      await expect(call()).rejects.toMatchObject({ argument })
    }
    expect(await a.overrides.list()).toEqual([])
  })
})

it('the number of identities with overrides is bounded; the control key lives as long as its override', async () => {
  const prefix = uniquePrefix('ovb')
  const limiter = new RateLimiter({ store: new RedisStore(client), prefix, limit: 1, window: '1m' })
  // fill the index to its bound directly: writing 100,000 overrides one by one would take the test's time
  const index = `${prefix}:{~c}:overrides`
  const fill: string[] = []
  for (let i = 0; i < MAX_OVERRIDES; i++) fill.push(`id${i}`, '0|=2')
  for (let i = 0; i < fill.length; i += 20_000) await client.hSet(index, fill.slice(i, i + 20_000))
  await expect(limiter.overrides.set('one-more', { limit: 2 })).rejects.toThrow(/index is full/)
  expect((await limiter.consume('one-more')).limit).toBe(1) // nothing applied
  await limiter.overrides.set('id7', { limit: 3 }) // one already held may change
  expect((await limiter.consume('id7')).limit).toBe(3)
  await client.del(index)

  await limiter.overrides.set('t', { limit: 2 }, { ttl: '1h' })
  const ttl = await client.pTTL(`${prefix}:{t}:~c`)
  expect(ttl).toBeGreaterThan(3_500_000)
  expect(ttl).toBeLessThanOrEqual(3_600_000)
  await limiter.block('t', { for: '2h' })
  expect(await client.pTTL(`${prefix}:{t}:~c`)).toBeGreaterThan(7_000_000)
  await limiter.overrides.set('t', { limit: 2 })
  expect(await client.pTTL(`${prefix}:{t}:~c`)).toBe(-1) // an override without end keeps its key
  await limiter.overrides.delete('t')
  expect(await client.pTTL(`${prefix}:{t}:~c`)).toBeGreaterThan(7_000_000)
  await limiter.unblock('t')
  expect(await client.exists(`${prefix}:{t}:~c`)).toBe(0)
})
