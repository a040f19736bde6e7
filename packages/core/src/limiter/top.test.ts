/**
 * `limiter.top()`: the identities each policy refused most, counted only for refused calls (the deny
 * cache's answers included), shared by every process on the prefix, bounded in Redis whatever the number
 * of identities, expiring with its periods; the memory store keeps the same sets.
 */
import {
  at,
  clearOfBoundary,
  crossedBoundary,
  type RedisServerHandle,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { ConfigError, InputError, MemoryStore, RateLimiter, RedisStore, type Store } from '../index'

let server: RedisServerHandle
let client: ReturnType<typeof createClient>
let other: ReturnType<typeof createClient>
beforeAll(async () => {
  server = await startRedisServer() // its own: the test reads every key of a prefix
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

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const topKeys = (prefix: string) => client.keys(`${prefix}:{~h:t}:*`)

async function run(limiter: RateLimiter, calls: [string, number][]): Promise<void> {
  for (const [identity, n] of calls) for (let i = 0; i < n; i++) await limiter.consume(identity)
}

describe.each([
  ['RedisStore', () => new RedisStore(client)],
  ['MemoryStore', () => new MemoryStore()],
] as const)('top refused identities (%s)', (_kind, storeOf: () => Store) => {
  it('counts refusals only, most refused first, deny-cache answers included', async () => {
    await clearOfBoundary(MINUTE, 15_000) // the counts below assume one period
    const prefix = uniquePrefix('top')
    const api = new RateLimiter({ store: storeOf(), prefix, limit: 2, window: '1m' })
    await run(api, [['calm', 2]])
    expect(await api.top()).toEqual([]) // admitted calls write nothing
    if (_kind === 'RedisStore') expect(await topKeys(prefix)).toEqual([])
    await run(api, [
      ['a', 7],
      ['b', 3],
      ['c', 4],
    ])
    expect(await api.top()).toEqual([
      { identity: 'a', policy: 'default', refused: 5 },
      { identity: 'c', policy: 'default', refused: 2 },
      { identity: 'b', policy: 'default', refused: 1 },
    ])
    expect(await api.top({ limit: 1 })).toEqual([{ identity: 'a', policy: 'default', refused: 5 }])
  })

  it('per policy: a refusal counts for the policies that refused', async () => {
    await clearOfBoundary(15 * MINUTE, 15_000)
    const login = new RateLimiter({
      store: storeOf(),
      prefix: uniquePrefix('top2'),
      policies: { ip: { limit: 100, window: '15m' }, account: { limit: 1, window: '15m' } },
    })
    for (let i = 0; i < 4; i++) await login.consume({ ip: 'ip:1', account: 'acct:1' })
    expect(await login.top()).toEqual([{ identity: 'acct:1', policy: 'account', refused: 3 }])
    expect(await login.top({ policy: 'ip' })).toEqual([])
  })
})

describe('top refused identities on Redis', () => {
  it('every process counts into the same sets and reads them', async () => {
    await clearOfBoundary(MINUTE, 20_000)
    const prefix = uniquePrefix('top3')
    const one = new RateLimiter({ store: new RedisStore(client), prefix, limit: 1, window: '1m' })
    const two = new RateLimiter({ store: new RedisStore(other), prefix, limit: 1, window: '1m' })
    await run(one, [['x', 4]])
    await run(two, [['x', 3]])
    await two.top() // adds its own pending refusals
    // the first process adds its own within about a second, by itself
    let seen = await two.top()
    for (let i = 0; i < 100 && seen[0]?.refused !== 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      seen = await two.top()
    }
    expect(seen).toEqual([{ identity: 'x', policy: 'default', refused: 6 }]) // 3 + 3: one was admitted
  })

  it('a flood of fresh refused identities stays within the cap; the heavy one stays on top', async () => {
    const prefix = uniquePrefix('top4')
    const api = new RateLimiter({
      store: new RedisStore(client),
      prefix,
      limit: 1,
      window: '1h',
      top: { maxIdentities: 1000 },
    })
    const started = Date.now()
    const FRESH = 100_000
    let sent = 0
    const flood = async () => {
      // cost 2 on a limit of 1: refused at once, with nothing spent
      while (sent < FRESH) await api.consume(`fresh:${sent++}`, { cost: 2 })
    }
    const heavy = async () => {
      for (let i = 0; i < 50; i++) await api.consume('attacker', { cost: 2 })
    }
    await Promise.all([flood(), flood(), flood(), flood(), heavy()])
    const top = await api.top({ limit: 3 })
    expect(top[0]).toEqual({ identity: 'attacker', policy: 'default', refused: 50 })
    // one set per period: a second one only when the flood ran across an hour's boundary
    const keys = await topKeys(prefix)
    expect(keys.length).toBe(crossedBoundary(started, HOUR) ? 2 : 1)
    for (const key of keys) {
      expect(await client.zCard(key)).toBeLessThanOrEqual(1000)
      const pttl = await client.pTTL(key)
      expect(pttl).toBeGreaterThan(0)
      expect(pttl).toBeLessThanOrEqual(2 * HOUR) // two periods at most
    }
    const key = at(keys, 0)
    const bytes = Number(await client.sendCommand(['MEMORY', 'USAGE', key, 'SAMPLES', '0']))
    console.log(
      `[top] ${FRESH} fresh refused identities + 1 heavy: ${await client.zCard(key)} members, ${bytes} B in Redis`,
    )
  }, 120_000)

  it('options are checked; top: false counts nothing', async () => {
    const store = new RedisStore(client)
    expect(
      () =>
        new RateLimiter({
          store,
          prefix: uniquePrefix('t5'),
          limit: 1,
          window: '1m',
          top: { maxIdentities: 0 },
        }),
    ).toThrow(ConfigError)
    expect(
      () =>
        new RateLimiter({ store, prefix: uniquePrefix('t5'), limit: 1, window: '1m', top: true as never }),
    ).toThrow(ConfigError)
    const off = new RateLimiter({ store, prefix: uniquePrefix('t5'), limit: 1, window: '1m', top: false })
    await run(off, [['z', 3]])
    await expect(off.top()).rejects.toThrow(InputError)
    const on = new RateLimiter({ store, prefix: uniquePrefix('t5'), limit: 1, window: '1m' })
    await expect(on.top({ limit: 0 })).rejects.toThrow(InputError)
    await expect(on.top({ policy: 'nope' })).rejects.toThrow(InputError)
  })
})

describe('top refused identities, while the store does not answer', () => {
  it('one add is out at a time, and the tally waiting behind it stays bounded', async () => {
    const memory = new MemoryStore()
    const sizes: number[] = []
    let answer = () => {}
    const held = new Promise<void>((resolve) => {
      answer = resolve
    })
    // the memory store's own sets, behind a first add that is answered only when the test says so
    const sets = memory.topSets
    const store: Store = Object.assign(Object.create(memory) as MemoryStore, {
      topSets: {
        add: async (...args: Parameters<typeof sets.add>) => {
          sizes.push(args[3].size)
          if (sizes.length === 1) await held
          return sets.add(...args)
        },
        read: (keys: readonly string[]) => sets.read(keys),
      },
    })
    const api = new RateLimiter({ store, prefix: uniquePrefix('top6'), limit: 1, window: '1m' })
    await clearOfBoundary(MINUTE, 15_000) // one period: one add per round
    for (let i = 0; i < 30_000; i++) await api.consume(`fresh:${i}`, { cost: 2 })
    expect(sizes).toEqual([10_000]) // the first add is still out: no second one
    answer()
    const top = await api.top({ limit: 1 })
    expect(top).toHaveLength(1)
    // what waited was bounded: the identities seen while the add was out, at most 10,000
    expect(sizes).toHaveLength(2)
    expect(sizes[1]).toBeLessThanOrEqual(10_000)
  })
})
