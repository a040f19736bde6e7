/**
 * A customer's billing day: a calendar month that starts on another day than the 1st for one identity,
 * set through its override. The boundaries are checked at fixed dates (February, the 31st, DST changes
 * in both hemispheres) in the platform's zone rules; then the scripts, which compute the anchored month
 * from the table each call carries, are checked against them on Redis' own clock for every day of the
 * month in several zones, through the single-call and the batch scripts, and the memory store as twin.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { InputError, MemoryStore, RateLimiter, RedisStore, type Store } from '../src'
import { calendarBoundaries, resolveCalendar, withAnchor } from '../src/calendar'
import { twoClients } from './clients'

const month = (timeZone: string) => resolveCalendar({ calendar: 'month', timeZone }, 'window')
const iso = (ms: number) => new Date(ms).toISOString()

describe('billing-day boundaries (the platform zone rules)', () => {
  it('a month on the 17th crosses a DST change at its real length', () => {
    const ny = withAnchor(month('America/New_York'), 17)
    // US DST starts 2027-03-14: the period from Feb 17 (EST) to Mar 17 (EDT) is an hour short of 28 days
    expect(calendarBoundaries(ny, Date.UTC(2027, 2, 1)).map(iso)).toEqual([
      '2027-01-17T05:00:00.000Z',
      '2027-02-17T05:00:00.000Z',
      '2027-03-17T04:00:00.000Z',
      '2027-04-17T04:00:00.000Z',
    ])
    // before the 17th, the period began last month
    expect(calendarBoundaries(ny, Date.UTC(2027, 2, 16, 12))[1]).toBe(Date.UTC(2027, 1, 17, 5))
    const sydney = withAnchor(month('Australia/Sydney'), 10)
    // Sydney leaves DST on 2027-04-04: Mar 10 starts at +11, Apr 10 at +10
    expect(
      calendarBoundaries(sydney, Date.UTC(2027, 2, 20))
        .slice(1, 3)
        .map(iso),
    ).toEqual(['2027-03-09T13:00:00.000Z', '2027-04-09T14:00:00.000Z'])
  })

  it('a day past a month end starts that month on its last day (February, 30-day months)', () => {
    const utc31 = withAnchor(month('UTC'), 31)
    expect(calendarBoundaries(utc31, Date.UTC(2028, 1, 15)).map(iso)).toEqual([
      '2027-12-31T00:00:00.000Z',
      '2028-01-31T00:00:00.000Z',
      '2028-02-29T00:00:00.000Z', // 2028 is a leap year
      '2028-03-31T00:00:00.000Z',
    ])
    expect(calendarBoundaries(withAnchor(month('UTC'), 30), Date.UTC(2027, 2, 1))[1]).toBe(
      Date.UTC(2027, 1, 28),
    )
    // April has 30 days: its period starts on the 30th, and the 29th is still March's
    expect(calendarBoundaries(withAnchor(month('UTC'), 31), Date.UTC(2027, 3, 29, 23))[1]).toBe(
      Date.UTC(2027, 2, 31),
    )
    expect(calendarBoundaries(withAnchor(month('UTC'), 31), Date.UTC(2027, 3, 30))[1]).toBe(
      Date.UTC(2027, 3, 30),
    )
    // day 1 is the plain month
    expect(withAnchor(month('UTC'), 1)).toEqual(month('UTC'))
  })
})

const clients = twoClients()

async function redisMs(): Promise<number> {
  const t = (await clients.one.sendCommand(['TIME'])) as string[]
  return Number(t[0]) * 1000 + Math.floor(Number(t[1]) / 1000)
}

const ZONES = [
  'UTC',
  'Europe/Berlin',
  'America/New_York',
  'Australia/Sydney',
  'Australia/Lord_Howe',
  'Asia/Kathmandu',
]

describe.each([
  [
    'single calls',
    () => [new RedisStore(clients.one, { batch: false }), new RedisStore(clients.two, { batch: false })],
  ],
  ['the batch script', () => [new RedisStore(clients.one), new RedisStore(clients.two)]],
  ['MemoryStore', () => [new MemoryStore()]],
] as const)('billing day, %s', (kind, storesOf: () => readonly Store[]) => {
  const redis = kind !== 'MemoryStore'
  const nowMs = () => (redis ? redisMs() : Promise.resolve(Date.now()))

  it('every day of the month, in zones with DST, half-hour and 45-minute offsets, ends where the platform says', async () => {
    const [store] = storesOf()
    for (const timeZone of ZONES) {
      const prefix = uniquePrefix('bill')
      const limiter = new RateLimiter({
        store: store!,
        prefix,
        limit: 100,
        window: { calendar: 'month', timeZone },
      })
      const days = Array.from({ length: 31 }, (_, i) => i + 1)
      await Promise.all(days.map((day) => limiter.overrides.set(`c${day}`, { billingDay: day })))
      const before = await nowMs()
      const decisions = await Promise.all(days.map((day) => limiter.consume(`c${day}`)))
      const after = await nowMs()
      for (const day of days) {
        const d = decisions[day - 1]!
        // the period's end around the call's time (a period boundary between before and after is not
        // a concern: each end is checked against the one the call's own resetMs names)
        const ends = [before, after].map((t) => calendarBoundaries(withAnchor(month(timeZone), day), t)[2])
        const end = ends.find((e) => Math.abs(e - (before + d.resetMs)) <= after - before + 1)
        expect({ timeZone, day, end: end && iso(end) }).toEqual({ timeZone, day, end: expect.any(String) })
        expect(d).toMatchObject({ allowed: true, limit: 100, remaining: 99 })
        if (redis) {
          const [key] = (await clients.one.keys(`${prefix}:{c${day}}:*`)).filter((k) => !k.endsWith(':~c'))
          expect({ day, timeZone, expires: await clients.one.pExpireTime(key!) }).toEqual({
            day,
            timeZone,
            expires: end,
          })
        }
      }
    }
  })

  it('two customers on the same plan renew on their own days, set by one process and seen by another', async () => {
    const stores = storesOf()
    const prefix = uniquePrefix('bill')
    const options = {
      prefix,
      policies: {
        second: { limit: 10, window: '1s' },
        monthly: { limit: 3, window: { calendar: 'month', timeZone: 'Europe/Berlin' } },
      },
    } as const
    const admin = new RateLimiter({ store: stores[0]!, ...options })
    const app = new RateLimiter({ store: stores[1] ?? stores[0]!, ...options, denyCache: false })
    await admin.overrides.set('acme', { monthly: { limit: 5, billingDay: 17 } })
    await admin.overrides.set('globex', { monthly: { billingDay: 3 } })
    expect(await app.overrides.get('acme')).toEqual({ monthly: { limit: 5, billingDay: 17 } })
    expect(await app.overrides.get('globex')).toEqual({ monthly: { billingDay: 3 } })
    const now = await nowMs()
    const endOf = (day: number) => calendarBoundaries(withAnchor(month('Europe/Berlin'), day), now)[2]
    const acme = await app.consume('acme')
    const globex = await app.consume('globex')
    const plain = await app.consume('initech')
    const monthly = (d: typeof acme) => d.policies.find((p) => p.policy === 'monthly')!
    expect(monthly(acme)).toMatchObject({ limit: 5, remaining: 4 })
    expect(monthly(globex)).toMatchObject({ limit: 3, remaining: 2 })
    const near = (got: number, end: number) => expect(Math.abs(now + got - end)).toBeLessThan(2000)
    near(monthly(acme).resetMs, endOf(17))
    near(monthly(globex).resetMs, endOf(3))
    near(monthly(plain).resetMs, endOf(1))
    // peek, and the exhausted quota's retry, count to the customer's own day
    for (let i = 0; i < 4; i++) await app.consume('acme')
    const refused = await app.consume('acme')
    expect(refused.allowed).toBe(false)
    near(refused.retryAfterMs, endOf(17))
    near(monthly(await app.peek('acme')).resetMs, endOf(17))
  })

  it('a refund and a settlement stay in the billing period of the spend', async () => {
    const [store] = storesOf()
    const limiter = new RateLimiter({
      store: store!,
      prefix: uniquePrefix('bill'),
      limit: 10,
      window: { calendar: 'month', timeZone: 'America/New_York' },
    })
    await limiter.overrides.set('c', { billingDay: 23 })
    const d = await limiter.consume('c', { cost: 4 })
    expect(d.remaining).toBe(6)
    await limiter.refund(d)
    expect((await limiter.peek('c')).remaining).toBe(10)
    const spent = await limiter.consume('c', { cost: 5 })
    await limiter.settle(spent, 2)
    expect((await limiter.peek('c')).remaining).toBe(8)
    const more = await limiter.consume('c', { cost: 1 })
    await limiter.settle(more, 4)
    expect((await limiter.peek('c')).remaining).toBe(4)
  })
})

describe('billing day: bad input, before the store', () => {
  const limiter = new RateLimiter({
    store: new MemoryStore(),
    policies: {
      second: { limit: 10, window: '1s' },
      monthly: { limit: 3, window: { calendar: 'month' } },
      daily: { limit: 3, window: { calendar: 'day' } },
    },
  })
  it.each([
    [{ monthly: { billingDay: 0 } }, 'limits.monthly.billingDay'],
    [{ monthly: { billingDay: 32 } }, 'limits.monthly.billingDay'],
    [{ monthly: { billingDay: 1.5 } }, 'limits.monthly.billingDay'],
    [{ monthly: { billingDay: '17' } }, 'limits.monthly.billingDay'],
    [{ second: { billingDay: 17 } }, 'limits.second.billingDay'],
    [{ daily: { billingDay: 17 } }, 'limits.daily.billingDay'],
    [{ monthly: {} }, 'limits.monthly'],
  ])('%j is refused naming %s', async (limits, argument) => {
    const error = await limiter.overrides.set('c', limits as never).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InputError)
    expect((error as Error).message).toContain(argument)
    expect(await limiter.overrides.get('c')).toBeUndefined()
  })
})
