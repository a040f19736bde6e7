/**
 * Calendar windows on a real redis-server, through the single-call scripts (`batch: false`) and the batch
 * script, and the MemoryStore twin: the key expires at its period's end, resetMs counts to that end, a
 * refund stays in the spend's period, and a calendar policy shares one atomic call with a sliding window.
 * Periods are placed by a test boundary provider relative to Redis' own TIME (no clock in Lua is faked),
 * or by the real calendar with bounds that hold whichever side of a boundary the test runs on.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import type { RedisClientType } from 'redis'
import { MemoryStore, RateLimiter, RedisStore, type TollgateEvent } from '../src'
import { calendarBoundaries, setBoundaryProvider } from '../src/calendar'
import { nodeRedis } from './clients'

const DAY = 86_400_000
const H = 3_600_000

let client: RedisClientType<any, any, any>
beforeAll(async () => {
  client = (await nodeRedis()) as RedisClientType<any, any, any>
})
afterAll(async () => {
  setBoundaryProvider(undefined)
  await client?.quit()
})
afterEach(() => setBoundaryProvider(undefined))

async function redisMs(): Promise<number> {
  const [s, us] = await client.time().then((t: any) => (Array.isArray(t) ? t : [t.unix ?? t, 0]))
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

/** Places the current period at [start, end), with neighbours a day long. */
function place(start: number, end: number): void {
  setBoundaryProvider(() => [start - DAY, start, end, end + DAY])
}

async function onlyKey(prefix: string): Promise<string> {
  const keys = await client.keys(`${prefix}:*`)
  expect(keys).toHaveLength(1)
  return keys[0]!
}

describe.each([
  ['single calls', false],
  ['the batch script', true],
] as const)('RedisStore, %s', (_, batch) => {
  let store: RedisStore
  beforeAll(() => {
    store = new RedisStore(client, { batch })
  })

  it('expires the key at the real period end and counts resetMs and retryAfterMs to it', async () => {
    const prefix = uniquePrefix('cal')
    const limiter = new RateLimiter({
      store,
      prefix,
      limit: 2,
      window: { calendar: 'month', timeZone: 'Europe/Berlin' },
    })
    const before = await redisMs()
    const cal = { unit: 'month' as const, timeZone: 'Europe/Berlin' }
    // the month holding Redis' time, whichever side of a boundary the calls fall on
    const ends = new Set([calendarBoundaries(cal, before)[2], calendarBoundaries(cal, before + 60_000)[2]])
    await limiter.consume('acme')
    await limiter.consume('acme')
    const refused = await limiter.consume('acme')
    const after = await redisMs()
    expect(refused.allowed).toBe(false)
    const end = Number(await client.sendCommand(['PEXPIRETIME', await onlyKey(prefix)]))
    expect(ends.has(end)).toBe(true)
    expect(refused.resetMs).toBeGreaterThanOrEqual(end - after)
    expect(refused.resetMs).toBeLessThanOrEqual(end - before)
    expect(refused.retryAfterMs).toBe(refused.resetMs)
  })

  it('a 23-hour period placed by the boundaries is counted to its end, not 24 hours', async () => {
    const prefix = uniquePrefix('cal')
    const now = await redisMs()
    place(now - H, now + 22 * H)
    const limiter = new RateLimiter({ store, prefix, limit: 1, window: { calendar: 'day' } })
    const d = await limiter.consume('k')
    const after = await redisMs()
    expect(d.resetMs).toBeGreaterThan(22 * H - (after - now) - 1)
    expect(d.resetMs).toBeLessThanOrEqual(22 * H)
    expect(Number(await client.sendCommand(['PEXPIRETIME', await onlyKey(prefix)]))).toBe(now + 22 * H)
  })

  it("a refund gives back to its own period's count, never to another period's", async () => {
    const prefix = uniquePrefix('cal')
    const now = await redisMs()
    const limiter = new RateLimiter({ store, prefix, limit: 10, window: { calendar: 'week' } })
    place(now - H, now + H)
    const spent = await limiter.consume('k', { cost: 3 })
    const key = await onlyKey(prefix)
    // the boundaries moved (another process's zone rules), but on Redis' clock the spend's period still
    // runs and the key, expiring at its end, is its count: given back
    place(now - 10 * 60_000, now + 30 * 60_000)
    await limiter.refund(spent, { cost: 1 })
    expect(await client.get(key)).toBe('2')
    // the key now counts another period (it ends elsewhere): the refund must not reach into it
    await client.pExpireAt(key, now + 10 * H)
    await limiter.refund(spent, { cost: 1 })
    expect(await client.get(key)).toBe('2')
  })

  it('checks and charges a per-second and a calendar policy in one atomic call', async () => {
    const prefix = uniquePrefix('cal')
    const limiter = new RateLimiter({
      store,
      prefix,
      policies: {
        second: { limit: 10, window: '1s' },
        monthly: { limit: 4, window: { calendar: 'month', timeZone: 'America/New_York' } },
      },
    })
    const now = await redisMs()
    place(now - H, now + H)
    const decisions = await Promise.all(Array.from({ length: 6 }, () => limiter.consume('user')))
    expect(decisions.filter((d) => d.allowed)).toHaveLength(4)
    const refused = decisions.find((d) => !d.allowed)!
    expect(refused.policies.map((p) => p.policy)).toEqual(['second', 'monthly'])
    expect(refused.policies[1]!.allowed).toBe(false)
    expect(refused.policies[1]!.windowMs).toBe(30 * DAY)
    // a refused call charged nothing: the per-second policy holds only the admitted four
    const peek = await limiter.peek('user')
    expect(peek.policies[0]!.remaining).toBeGreaterThanOrEqual(6)
    expect(peek.policies[1]!.remaining).toBe(0)
  })

  it('refuses to decide when Redis time lies outside every period sent', async () => {
    const prefix = uniquePrefix('cal')
    const now = await redisMs()
    setBoundaryProvider(() => [now + DAY, now + 2 * DAY, now + 3 * DAY, now + 4 * DAY])
    const events: TollgateEvent[] = []
    const limiter = new RateLimiter({
      store,
      prefix,
      limit: 5,
      window: { calendar: 'day' },
      onStoreError: 'deny',
      onEvent: (e) => events.push(e),
    })
    const d = await limiter.consume('k')
    expect(d.allowed).toBe(false)
    expect(d.source).toBe('fallback')
    expect(await client.keys(`${prefix}:*`)).toEqual([])
    // said out loud, as a fault of this call's data: the breaker keeps serving other identities
    const error = events.find((e) => e.type === 'store-error')
    expect(error).toMatchObject({ fault: 'data' })
    expect(String((error as { error: Error }).error.message)).toMatch(/server time outside the periods sent/)
  })
})

describe('RedisStore, storage: compact', () => {
  it('keeps a calendar policy on a key of its own, next to a compacted one, in one call', async () => {
    const store = new RedisStore(client, { storage: 'compact', secret: 'calendar-compact-secret-0123' })
    const prefix = uniquePrefix('calc')
    const now = await redisMs()
    place(now - H, now + 2 * H)
    const limiter = new RateLimiter({
      store,
      prefix,
      policies: {
        minute: { limit: 100, window: '1m', algorithm: 'fixed-window' },
        monthly: { limit: 2, window: { calendar: 'month' } },
      },
    })
    for (let i = 0; i < 3; i++) await limiter.consume('acme')
    const peek = await limiter.peek('acme')
    expect(peek.policies[1]!.remaining).toBe(0)
    expect(peek.policies[0]!.remaining).toBeGreaterThanOrEqual(98) // a minute boundary may have passed
    const key = limiter.keysFor('acme')[1]!
    expect(await client.get(key)).toBe('2')
    expect(Number(await client.sendCommand(['PEXPIRETIME', key]))).toBe(now + 2 * H)
  })
})

describe('MemoryStore twin', () => {
  it('decides as the script does: resetMs to the period end, refunds kept in the period', async () => {
    const now = Date.now()
    place(now - H, now + 5 * H)
    const limiter = new RateLimiter({ store: new MemoryStore(), limit: 2, window: { calendar: 'year' } })
    const a = await limiter.consume('k')
    expect(a.resetMs).toBeLessThanOrEqual(5 * H)
    expect(a.resetMs).toBeGreaterThan(4 * H)
    await limiter.consume('k')
    expect((await limiter.peek('k')).remaining).toBe(0)
    place(now - 60_000, now + H) // a new period: a fresh count, and the old spend's refund is void
    expect((await limiter.consume('k')).allowed).toBe(true)
    await limiter.refund(a)
    expect((await limiter.peek('k')).remaining).toBe(1)
  })

  it('refuses to decide, as the script, when no period holds its clock', async () => {
    const now = Date.now()
    setBoundaryProvider(() => [now + DAY, now + 2 * DAY, now + 3 * DAY, now + 4 * DAY])
    const store = new MemoryStore()
    const limiter = new RateLimiter({ store, limit: 2, window: { calendar: 'day' }, onStoreError: 'deny' })
    const d = await limiter.consume('k')
    expect(d.allowed).toBe(false)
    expect(d.source).toBe('fallback')
  })
})
