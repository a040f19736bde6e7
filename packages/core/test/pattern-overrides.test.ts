/**
 * Pattern overrides (`overrides.set('tenant:acme:*', ...)`) on a real redis-server and the memory store
 * twin: set in one process and applied by another on its next call, through single calls and batches;
 * the longest pattern wins and an identity's own override wins over any pattern; get, list and delete;
 * bounded, and bad patterns refused before Redis. The cluster case is in stores/blocks-cluster.test.ts.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { InputError, MemoryStore, RateLimiter, RedisStore, type Store } from '../src'
import { MAX_PATTERNS } from '../src/patterns'
import { twoClients } from './clients'

const clients = twoClients()

const policies = {
  rate: { limit: 100, window: '1h' },
  monthly: { limit: 3, window: { calendar: 'month', timeZone: 'Europe/Berlin' } },
} as const

describe.each([
  [
    'single calls',
    () => [new RedisStore(clients.one, { batch: false }), new RedisStore(clients.two, { batch: false })],
  ],
  ['batches', () => [new RedisStore(clients.one), new RedisStore(clients.two)]],
  [
    "storage: 'compact', single calls",
    () => [
      new RedisStore(clients.one, { storage: 'compact', batch: false }),
      new RedisStore(clients.two, { storage: 'compact', batch: false }),
    ],
  ],
  [
    "storage: 'compact', batches",
    () => [
      new RedisStore(clients.one, { storage: 'compact' }),
      new RedisStore(clients.two, { storage: 'compact' }),
    ],
  ],
  ['MemoryStore', () => [new MemoryStore()]],
] as const)('pattern overrides, %s', (_kind, storesOf: () => readonly Store[]) => {
  const pair = () => {
    const stores = storesOf()
    const prefix = uniquePrefix('pat')
    const admin = new RateLimiter({ store: stores[0]!, prefix, policies })
    const app = new RateLimiter({ store: stores[1] ?? stores[0]!, prefix, policies, denyCache: false })
    return [admin, app] as const
  }
  const monthly = (d: { policies: readonly { policy: string; limit: number }[] }) =>
    d.policies.find((p) => p.policy === 'monthly')!.limit

  it("a pattern sets a window policy's limit, single calls and a turn of calls", async () => {
    const [admin, app] = pair()
    expect((await app.consume('tenant:w:u0')).policies[0]).toMatchObject({ policy: 'rate', limit: 100 })
    await admin.overrides.set('tenant:w:*', { rate: { limit: 2 } })
    expect((await app.consume('tenant:w:u1')).policies[0]).toMatchObject({ limit: 2, remaining: 1 })
    const ds = await Promise.all(Array.from({ length: 4 }, () => app.consume('tenant:w:u2')))
    expect(ds.map((d) => d.allowed)).toEqual([true, true, false, false])
    expect((await app.consume('tenant:v:u2')).policies[0]).toMatchObject({ limit: 100, remaining: 99 })
  })

  it('a pattern set by one process applies on the next call of another, to every identity it starts', async () => {
    const [admin, app] = pair()
    expect(monthly(await app.consume('tenant:acme:u0'))).toBe(3) // the app has read its table
    await admin.overrides.set('tenant:acme:*', { monthly: { limit: 500 } }, { ttl: '30d' })
    const d = await app.consume('tenant:acme:u1')
    expect(d.policies.find((p) => p.policy === 'monthly')).toMatchObject({ limit: 500, remaining: 499 })
    expect(monthly(await app.peek('tenant:acme:u0'))).toBe(500)
    expect(monthly(await app.consume('tenant:acmeX'))).toBe(3) // a prefix, not a word
    expect(monthly(await app.consume('tenant:other:u1'))).toBe(3)
    // a turn of concurrent calls right after a change (one batch on Redis)
    await admin.overrides.set('tenant:acme:*', { monthly: { limit: 700 } })
    const ds = await Promise.all(Array.from({ length: 20 }, (_, i) => app.consume(`tenant:acme:c${i}`)))
    expect(ds.map(monthly)).toEqual(ds.map(() => 700))
    expect(await app.overrides.get('tenant:acme:*')).toEqual({ monthly: { limit: 700 } })
    const listed = await app.overrides.list()
    expect(listed).toEqual([
      { identity: 'tenant:acme:*', limits: { monthly: { limit: 700 } }, expiresInMs: Infinity },
    ])
    await admin.overrides.delete('tenant:acme:*')
    expect(monthly(await app.consume('tenant:acme:u2'))).toBe(3)
    expect(await app.overrides.get('tenant:acme:*')).toBeUndefined()
    expect(await app.overrides.list()).toEqual([])
  })

  it("the longest pattern wins, and an identity's own override wins over any pattern", async () => {
    const [admin, app] = pair()
    await admin.overrides.set('tenant:*', { monthly: { limit: 50 } })
    await admin.overrides.set('tenant:acme:*', { monthly: { limit: 500 }, rate: { limit: 7 } })
    await admin.overrides.set('tenant:acme:vip', { monthly: { limit: 5000 } })
    const d = await app.consume('tenant:acme:u')
    expect(d.policies.map((p) => p.limit)).toEqual([7, 500])
    expect(monthly(await app.consume('tenant:beta:u'))).toBe(50)
    // the identity's own override replaces the pattern's whole: its rate is the policy's own
    expect((await app.consume('tenant:acme:vip')).policies.map((p) => p.limit)).toEqual([100, 5000])
    expect(monthly(await app.consume('user:1'))).toBe(3)
    // several identities in one call, each under its own pattern
    const both = await app.consume({ rate: 'tenant:beta:x', monthly: 'tenant:acme:y' })
    expect(both.policies.map((p) => p.limit)).toEqual([100, 500])
    expect((await app.overrides.list()).map((o) => o.identity).sort()).toEqual([
      'tenant:*',
      'tenant:acme:*',
      'tenant:acme:vip',
    ])
  })

  it('a pattern sets a billing day too', async () => {
    const [admin, app] = pair()
    await admin.overrides.set('tenant:acme:*', { monthly: { billingDay: 17 } })
    const d = (await app.consume('tenant:acme:u')).policies[1]!
    const plain = (await app.consume('tenant:beta:u')).policies[1]!
    expect(d.limit).toBe(3)
    // a month on the 17th ends on another day than one on the 1st (unless today is the 17th's eve)
    const end = (ms: number) =>
      new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', day: 'numeric' }).format(
        Math.round((Date.now() + ms) / 60_000) * 60_000,
      )
    expect([end(d.resetMs), end(plain.resetMs)]).toEqual(['17', '1'])
  })

  it('refuses a bad pattern before the store', async () => {
    const [admin] = pair()
    for (const bad of ['*', 'a*b*', '**']) {
      const error = await admin.overrides.set(bad, { monthly: { limit: 5 } }).catch((e: unknown) => e)
      expect([bad, error]).toEqual([bad, expect.any(InputError)])
      expect((error as Error).message).toContain("a prefix and one trailing '*'")
    }
    // as long as an identity may be, at most
    const long = await admin.overrides
      .set(`${'t'.repeat(1024)}*`, { monthly: { limit: 5 } })
      .catch((e: unknown) => e)
    expect(long).toBeInstanceOf(InputError)
    expect((long as Error).message).toContain('at most 1024 characters')
    expect(await admin.overrides.list()).toEqual([])
  })
})

it(`holds at most ${MAX_PATTERNS} patterns per prefix`, async () => {
  const prefix = uniquePrefix('patmax')
  const limiter = new RateLimiter({ store: new RedisStore(clients.one), prefix, policies })
  for (let i = 0; i < MAX_PATTERNS; i += 100) {
    await Promise.all(
      Array.from({ length: 100 }, (_, j) => limiter.overrides.set(`p${i + j}:*`, { monthly: { limit: 9 } })),
    )
  }
  const error = await limiter.overrides.set('one-more:*', { monthly: { limit: 9 } }).catch((e: unknown) => e)
  expect(String(error)).toContain(`the pattern table is full (${MAX_PATTERNS} patterns)`)
  // replacing one is not growing the table
  await limiter.overrides.set('p7:*', { monthly: { limit: 10 } })
  expect(monthly(await limiter.consume('p7:x'))).toBe(10)
  expect(monthly(await limiter.consume('one-more:x'))).toBe(3)
}, 60_000)

function monthly(d: { policies: readonly { policy: string; limit: number }[] }): number {
  return d.policies.find((p) => p.policy === 'monthly')!.limit
}

it('after the patterns are wiped (a FLUSHALL), the next change reaches a process that held the old ones', async () => {
  const prefix = uniquePrefix('patflush')
  const admin = new RateLimiter({ store: new RedisStore(clients.one), prefix, policies })
  const app = new RateLimiter({ store: new RedisStore(clients.two), prefix, policies, denyCache: false })
  await admin.overrides.set('tenant:acme:*', { monthly: { limit: 500 } })
  expect(monthly(await app.consume('tenant:acme:a'))).toBe(500)
  // what a FLUSHALL does to the prefix's patterns (the shared test server cannot be flushed)
  await clients.one.del([`${prefix}:{~c}:patterns`, `${prefix}:{~c}:pver`])
  await new Promise((resolve) => setTimeout(resolve, 5)) // the server's clock moves past the last version
  await admin.overrides.set('tenant:beta:*', { monthly: { limit: 70 } })
  expect(monthly(await app.consume('tenant:acme:b'))).toBe(3)
  expect(monthly(await app.consume('tenant:beta:b'))).toBe(70)
})
