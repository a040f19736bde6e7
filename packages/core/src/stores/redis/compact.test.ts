/**
 * `storage: 'compact'` against the real server: where the counters live (bucket hashes in listpack, an
 * expiry per window), that identities sharing a bucket never share a count, the bound on a level under a
 * flood, the roll of a sliding window's bucket, the secret, and the cluster spread. The conformance suite
 * (conformance.test.ts) and the cross-process race (batch-race.test.ts) run the same decisions on it.
 */
import { join } from 'node:path'
import {
  at,
  clearOfBoundary,
  crossedBoundary,
  type RaceHandle,
  redisUrl,
  sleepAtLeast,
  startRace,
  take,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { COMPACT } from '../../../test/fixtures/mixed-race-module'
import { sipHash24 } from '../../hash'
import {
  ConfigError,
  type RateLimiter as Limiter,
  RateLimiter,
  type RateLimiterOptions,
  RedisStore,
} from '../../index'
import { identityTag } from '../../keys'
import type { ResolvedPolicy } from '../../types'
import { keySlot } from './cluster-slot'
import { BUCKETS, CompactLayout, compactSpot, SECRET_TTL_MS } from './compact'
import type { CompactEntry } from './wire'

const SECRET = COMPACT.secret!
const DAY = 86_400_000
/** A sliding window's field as stored: its bucket's window parity q, its counts in that window and the one before. */
const stored = (q: number, curr: number, prev: number) => String(q + 2 * curr + prev * 2 ** 27)
let client: ReturnType<typeof createClient>

beforeAll(async () => {
  client = createClient({ url: redisUrl() })
  client.on('error', () => {})
  await client.connect()
})
afterAll(async () => {
  await client.quit()
})

const store = (secret = SECRET) => new RedisStore(client, { storage: 'compact', secret })
// the suite checks decisions, not deadlines: hundreds of calls at once on a loaded machine must not pass
// the default 500 ms, be answered by the failure policy, and drop the shared client's connection
const limiterOf = (options: RateLimiterOptions) => new RateLimiter({ timeoutMs: 10_000, ...options })
const POLICY: ResolvedPolicy = { name: 'default', algorithm: 'fixed-window', limit: 1, windowMs: 1, burst: 1 }
const layout = new CompactLayout(SECRET)

/** Where the layout puts an identity of a limiter: its first level's key and its field. */
function placed(limiter: Limiter, identity: string, secret = layout): { level: string; field: string } {
  const key = at(secret.map([{ policy: POLICY, key: at(limiter.keysFor(identity), 0) }]), 0).key
  return { level: key.slice(0, -10), field: key.slice(-9) }
}

/**
 * `count` identities that land in one bucket. The bucket depends on the identity alone (its policies and
 * prefixes only name the hash), so one search serves every limiter.
 */
const byBucket = new Map<string, string[]>()
let searched = 0
function sameBucket(_limiter: Limiter | undefined, count: number): string[] {
  for (const ids of byBucket.values()) if (ids.length >= count) return ids.slice(0, count)
  for (; ; searched++) {
    const id = `203.0.${searched >> 8}.${searched & 255}`
    const entry = at(layout.map([{ policy: POLICY, key: `p:{${id}}:fw-1s` }]), 0)
    const bucket = at(/\{~h:c(\d+)\}/.exec(entry.key)!, 1)
    const ids = byBucket.get(bucket) ?? []
    ids.push(id)
    byBucket.set(bucket, ids)
    if (ids.length === count) {
      searched++
      return ids.slice()
    }
  }
}

const serverMs = async () => {
  const [s, us] = (await client.sendCommand(['TIME'])) as string[]
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

it("SipHash-2-4 gives the reference implementation's outputs (key 00..0f, message 00..len-1)", () => {
  const key = new Uint32Array([0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c])
  const data = Uint8Array.from({ length: 32 }, (_, i) => i)
  const out = new Uint32Array(2)
  const hex = (len: number) => {
    sipHash24(key, data, len, out)
    return at(out, 0).toString(16).padStart(8, '0') + at(out, 1).toString(16).padStart(8, '0')
  }
  // every block boundary: empty, a partial block, one whole block, two
  expect([0, 1, 7, 8, 15, 16, 19].map(hex)).toEqual([
    '726fdb47dd0e0e31',
    '74f839c593dc67fd',
    'ab0200f58b01d137',
    '93f5f5799a932462',
    'a129ca6149be45e5',
    '3f2acc7f57c29bdb',
    'bb6dc91da77961bd',
  ])
})

it('remembers a pair by its identity, told apart from the same identity under another prefix or policy', () => {
  const other: ResolvedPolicy = { ...POLICY, name: 'day', algorithm: 'sliding-window' }
  const pairs = [
    { policy: POLICY, key: 'a:{ip:1.2.3.4}:fw-1s', identity: 'ip:1.2.3.4' },
    { policy: POLICY, key: 'b:{ip:1.2.3.4}:fw-1s', identity: 'ip:1.2.3.4' },
    { policy: other, key: 'a:{ip:1.2.3.4}:day:sw-1d', identity: 'ip:1.2.3.4' },
    { policy: POLICY, key: 'a:{ip:5.6.7.8}:fw-1s', identity: 'ip:5.6.7.8' },
  ]
  const remembering = new CompactLayout(SECRET)
  const first = pairs.map((e) => at(remembering.map([e]), 0))
  // built again, by concatenation as a limiter builds them: each as a layout that never saw the others
  // places it, and a limiter's pairs (one prefix per policy object) found again, not placed again
  const again = pairs.map((e) =>
    at(remembering.map([{ ...e, key: `${e.key.slice(0, 2)}${e.key.slice(2)}` }]), 0),
  )
  pairs.forEach((e, i) => {
    const alone = at(new CompactLayout(SECRET).map([e]), 0)
    expect(first[i]).toMatchObject({ key: alone.key, identity: e.identity })
    expect(again[i]).toMatchObject({ key: alone.key, identity: e.identity })
  })
  for (const i of [2, 3]) expect(again[i]).toBe(first[i])
  expect(new Set(first.map((e) => e.key)).size).toBe(4)
})

it("shares a bucket's levels among the identities placed in it, and trusts a key builder's pairs", () => {
  const remembering = new CompactLayout(SECRET)
  const [a, b] = take(sameBucket(undefined, 2), 2)
  const [ea, eb] = take(
    [a, b].map(
      (id) => remembering.map([{ policy: POLICY, key: `p:{${id}}:fw-1s`, identity: id }])[0] as CompactEntry,
    ),
    2,
  )
  expect(ea.field).not.toBe(eb.field)
  expect(ea.levels).toBe(eb.levels)
  const level = ea.key.slice(0, -10)
  expect(ea.levels).toEqual([level, `${level}!2`, `${level}!3`])
  // a builder's pair key follows from its identity and policy, so the layout need not compare it
  const builder = {}
  const e = { policy: POLICY, key: 'p:{ip:9.9.9.9}:fw-1s', identity: 'ip:9.9.9.9', builder }
  const first = remembering.map([e])[0]
  expect(remembering.map([{ ...e, key: 'p:{ip:9.9.9.9}:other' }])[0]).toBe(first)
  expect(remembering.map([{ ...e, key: 'p:{ip:9.9.9.9}:other', builder: {} }])[0]).not.toBe(first)
})

it('keeps a working set past one generation of remembered entries (10,000) without placing it again', () => {
  const layout = new CompactLayout(SECRET)
  const pairs = Array.from({ length: 15_000 }, (_, i) => ({
    policy: POLICY,
    key: `a:{ip:${i}}:fw-1s`,
    identity: `ip:${i}`,
  }))
  const pass = () => pairs.map((e) => layout.map([e])[0])
  pass() // the first 10,000 fill a generation, the other 5,000 start the next
  const second = pass()
  // every later pass finds each pair where it is, in either generation: the same entry, not a new one
  const third = pass()
  expect(third.filter((entry, i) => entry !== second[i]).length).toBe(0)
  expect(new Set(third).size).toBe(15_000)
})

it("compactSpot gives the bucket and field of a pair's entry, as its documentation says", () => {
  const secret = 'the-store-secret-1234'
  const spot = compactSpot(secret, identityTag('ip:203.0.113.9'))
  expect(spot).toEqual({ bucket: 6417, field: 't_ttlz-hF' })
  const [entry] = take(
    new CompactLayout(secret).map([{ policy: POLICY, key: 'api:{ip:203.0.113.9}:ip:fw-1m' }]),
    1,
  )
  expect(entry.key).toBe(`api:{~h:c${spot.bucket}}:ip:fw-1m!${spot.field}`)
})

describe('storage: compact', () => {
  it('keeps fixed-window counts as fields of a listpack hash that expires when the window ends', async () => {
    await clearOfBoundary(DAY, 60_000)
    const limiter = limiterOf({
      store: store(),
      prefix: uniquePrefix('cfw'),
      limit: 5,
      window: '1d',
      algorithm: 'fixed-window',
    })
    for (const id of ['a', 'b', 'c']) expect((await limiter.consume(id)).allowed).toBe(true)
    const { level, field } = placed(limiter, 'a')
    expect(level).toMatch(/:\{~h:c\d+\}:fw-1d$/)
    expect(await client.type(level)).toBe('hash')
    expect(await client.sendCommand(['OBJECT', 'ENCODING', level])).toBe('listpack')
    expect(await client.hGet(level, field)).toBe('1')
    const end = (Math.floor((await serverMs()) / DAY) + 1) * DAY
    expect(Number(await client.sendCommand(['PEXPIRETIME', level]))).toBe(end)
    expect(await client.exists(at(limiter.keysFor('a'), 0))).toBe(0) // no key of its own
  })

  it('keeps sliding-window counts in a bucket that expires two windows after the one it counts', async () => {
    await clearOfBoundary(DAY, 60_000)
    const limiter = limiterOf({
      store: store(),
      prefix: uniquePrefix('csw'),
      limit: 5,
      window: '1d',
      algorithm: 'sliding-window',
    })
    await limiter.consume('a', { cost: 2 })
    const { level, field } = placed(limiter, 'a')
    const wid = Math.floor((await serverMs()) / DAY)
    expect(await client.hGet(level, field)).toBe(stored(wid % 2, 2, 0))
    expect(Number(await client.sendCommand(['PEXPIRETIME', level]))).toBe((wid + 2) * DAY)
  })

  // A sliding field's parity says which window its bucket counts without reading the expiry; where the
  // two disagree (a field written by hand, or of another build), the expiry wins and the field reads as 0.
  const OTHER = 1 // the other window's parity: (wid + OTHER) % 2
  const HUGE = 60_000_000 // weighs past a limit of 5 wherever the day is (clearOfBoundary keeps off its end)
  const cases: {
    name: string
    /** Rewrites the bucket after `a` spent 1 in window wid; b's field and perhaps the expiry. */
    tamper: (level: string, a: string, b: string, wid: number) => Promise<unknown>
    /** a's and b's fields after b spent 1. */
    after: (wid: number) => [string, string]
  }[] = [
    {
      name: 'a reset field of the other parity does not roll the bucket',
      tamper: (level, _a, b, wid) => client.hSet(level, b, String((wid + OTHER) % 2)),
      after: (wid) => [stored(wid % 2, 1, 0), stored(wid % 2, 1, 0)],
    },
    {
      name: 'counts whose parity the expiry contradicts do not refuse',
      tamper: (level, _a, b, wid) => client.hSet(level, b, stored((wid + OTHER) % 2, HUGE, 0)),
      after: (wid) => [stored(wid % 2, 1, 0), stored(wid % 2, 1, 0)],
    },
    {
      name: 'counts whose parity the expiry contradicts do not roll the bucket',
      tamper: (level, _a, b, wid) => client.hSet(level, b, stored((wid + OTHER) % 2, 1, 0)),
      after: (wid) => [stored(wid % 2, 1, 0), stored(wid % 2, 1, 0)],
    },
    {
      name: "a bucket of the window before rolls on b's spend, its field's contradicting counts read as 0",
      tamper: async (level, a, b, wid) => {
        await client.sendCommand(['PEXPIREAT', level, String((wid + 1) * DAY)])
        await client.hSet(level, { [a]: stored((wid - 1) % 2, 2, 0), [b]: stored(wid % 2, HUGE, 0) })
      },
      after: (wid) => [stored(wid % 2, 0, 2), stored(wid % 2, 1, 0)],
    },
    {
      // a reset writes 0 whatever the window: its parity is this window's on every other day
      name: 'a bucket of the window before rolls on the spend of a reset field of this parity',
      tamper: async (level, a, b, wid) => {
        await client.sendCommand(['PEXPIREAT', level, String((wid + 1) * DAY)])
        await client.hSet(level, { [a]: stored((wid - 1) % 2, 2, 0), [b]: String(wid % 2) })
      },
      after: (wid) => [stored(wid % 2, 0, 2), stored(wid % 2, 1, 0)],
    },
  ]
  for (const batched of [false, true]) {
    for (const { name, tamper, after } of cases) {
      it(`sliding window${batched ? ', in a batch' : ''}: ${name}`, async () => {
        await clearOfBoundary(DAY, 60_000)
        const limiter = limiterOf({
          store: store(),
          prefix: uniquePrefix('cq'),
          limit: 5,
          window: '1d',
          algorithm: 'sliding-window',
        })
        const [a, b] = take(sameBucket(limiter, 2), 2)
        const { level, field: fa } = placed(limiter, a)
        const fb = placed(limiter, b).field
        // identities of other buckets, so that b's call is the second of a batch (a run of calls)
        const others = ['x', 'y', 'z', 'w'].filter((id) => placed(limiter, id).level !== level).slice(0, 2)
        expect(others).toHaveLength(2)
        expect((await limiter.consume(a)).allowed).toBe(true)
        const wid = Math.floor((await serverMs()) / DAY)
        await tamper(level, fa, fb, wid)
        const got = batched
          ? (
              await Promise.all([
                limiter.consume(at(others, 0)),
                limiter.consume(b),
                limiter.consume(at(others, 1)),
              ])
            )[1]
          : await limiter.consume(b)
        expect(got).toMatchObject({ allowed: true })
        expect([await client.hGet(level, fa), await client.hGet(level, fb)]).toEqual(after(wid))
      })
    }
  }

  it('identities of one bucket keep their own counts, refunds and resets', async () => {
    await clearOfBoundary(DAY, 60_000)
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      const limiter = limiterOf({
        store: store(),
        prefix: uniquePrefix('cb'),
        limit: 3,
        window: '1d',
        algorithm,
      })
      const [a, b] = take(sameBucket(limiter, 2), 2)
      for (let i = 0; i < 3; i++) expect((await limiter.consume(a)).allowed).toBe(true)
      expect((await limiter.consume(a)).allowed).toBe(false)
      expect(await limiter.consume(b)).toMatchObject({ allowed: true, remaining: 2 })
      const spend = await limiter.consume(b)
      await limiter.refund(spend)
      expect((await limiter.peek(b)).remaining).toBe(2)
      await limiter.reset(a)
      expect((await limiter.peek(a)).remaining).toBe(3)
      expect((await limiter.peek(b)).remaining).toBe(2)
    }
  })

  it('a refused call and a peek write nothing', async () => {
    await clearOfBoundary(DAY, 60_000)
    const limiter = limiterOf({
      store: store(),
      prefix: uniquePrefix('cr'),
      limit: 2,
      window: '1d',
      algorithm: 'fixed-window',
    })
    const ids = sameBucket(limiter, 3)
    for (const id of ids) await limiter.consume(id, { cost: 2 })
    const { level } = placed(limiter, at(ids, 0))
    const before = await client.hGetAll(level)
    const ttl = await client.sendCommand(['PEXPIRETIME', level])
    expect((await limiter.consume(at(ids, 0))).allowed).toBe(false)
    expect((await limiter.peek(at(ids, 1))).allowed).toBe(false)
    expect(await client.hGetAll(level)).toEqual(before)
    expect(await client.sendCommand(['PEXPIRETIME', level])).toEqual(ttl)
  })

  it('a flood of fresh identities fills two bounded levels, the third takes the rest, counts stay exact', async () => {
    await clearOfBoundary(DAY, 60_000)
    const limiter = limiterOf({
      store: store(),
      prefix: uniquePrefix('cf'),
      limit: 2,
      window: '1d',
      algorithm: 'fixed-window',
    })
    const ids = sameBucket(limiter, 600)
    const first = await Promise.all(ids.map((id) => limiter.consume(id)))
    expect(first.every((d) => d.allowed && at(d.policies, 0).remaining === 1)).toBe(true)
    const { level } = placed(limiter, at(ids, 0))
    expect(await client.hLen(level)).toBe(256)
    expect(await client.hLen(`${level}!2`)).toBe(256)
    expect(await client.hLen(`${level}!3`)).toBe(88)
    expect(await client.sendCommand(['OBJECT', 'ENCODING', level])).toBe('listpack')
    expect(await client.sendCommand(['OBJECT', 'ENCODING', `${level}!2`])).toBe('listpack')
    // each identity still has exactly one unit left, wherever it landed
    const second = await Promise.all(ids.map((id) => limiter.consume(id)))
    expect(second.every((d) => d.allowed && at(d.policies, 0).remaining === 0)).toBe(true)
    const third = await Promise.all(ids.map((id) => limiter.consume(id)))
    expect(third.some((d) => d.allowed)).toBe(false)
    // every level of the bucket expires with the window
    const end = (Math.floor((await serverMs()) / DAY) + 1) * DAY
    for (const key of [level, `${level}!2`, `${level}!3`]) {
      expect(Number(await client.sendCommand(['PEXPIRETIME', key]))).toBe(end)
    }
  }, 120_000) // finding 600 identities of one bucket is CPU work: slow on a loaded machine

  for (const batched of [false, true]) {
    it(`a spend on a field refunded to 0 lands in its window's level, not in an older one still alive${batched ? ', in a batch' : ''}`, async () => {
      // A window of the epoch that began under a second ago: a level expiring within the next second can
      // only be the window before's (as at a window's first ms, when the old level has not expired yet).
      const now = await serverMs()
      const W = Math.floor(now / 1000)
      const end = (Math.floor(now / W) + 1) * W
      const limiter = limiterOf({
        store: store(),
        prefix: uniquePrefix('cedge'),
        limit: 3,
        window: W,
        algorithm: 'fixed-window',
      })
      await limiter.peek('warm') // the prefix's secret checked: nothing else waits below
      const { level, field } = placed(limiter, 'edge')
      const dies = (await serverMs()) + 1000
      await client.hSet(level, field, '0')
      await client.sendCommand(['PEXPIREAT', level, String(dies)])
      if (batched) {
        // the first call goes alone and the store is busy: the next three go as one batch script
        const [, ...edge] = await Promise.all([
          limiter.peek('warm'),
          ...[0, 1, 2].map(() => limiter.consume('edge')),
        ])
        expect(edge.map((d) => d.allowed)).toEqual([true, true, true])
      } else {
        for (let i = 0; i < 3; i++) expect((await limiter.consume('edge')).allowed).toBe(true)
      }
      expect(Number(await client.sendCommand(['PEXPIRETIME', level]))).toBe(end)
      for (let t = await serverMs(); t <= dies; t = await serverMs()) await sleepAtLeast(dies + 1 - t)
      expect((await limiter.consume('edge')).allowed).toBe(false)
      expect(await client.hGet(level, field)).toBe('3')
    })
  }

  for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
    it(`${algorithm}: a call sent lean to a bucket whose first level is full goes again whole, and stays whole`, async () => {
      await clearOfBoundary(DAY, 60_000)
      // how many keys each script call of the store sends (the store sends through a client that
      // withCommandOptions gives)
      const sent: number[] = []
      const counting = <T extends object>(c: T): T =>
        new Proxy(c, {
          get(target, name) {
            const value = Reflect.get(target, name, target)
            if (typeof value !== 'function') return value
            if (name === 'withCommandOptions') return (o: unknown) => counting(value.call(target, o))
            if (name !== 'evalSha') return value.bind(target)
            return (sha: string, options: { keys: string[] }) => {
              if (options.keys.some((k) => k.includes(':{~h:c'))) sent.push(options.keys.length)
              return value.call(target, sha, options)
            }
          },
        })
      const limiter = limiterOf({
        store: new RedisStore(counting(client), { storage: 'compact', secret: SECRET }),
        prefix: uniquePrefix('clean'),
        limit: 2,
        window: '1d',
        algorithm,
      })
      const ids = sameBucket(limiter, 260)
      for (const id of ids.slice(0, 256)) await limiter.consume(id)
      const { level } = placed(limiter, at(ids, 0))
      expect(await client.hLen(level)).toBe(256)
      // alone: its first level, its control key and the version key; answered "resend whole", then sent
      // with its three levels
      sent.length = 0
      expect(at((await limiter.consume(at(ids, 256))).policies, 0).remaining).toBe(1)
      expect(sent).toEqual([3, 6])
      sent.length = 0
      expect(at((await limiter.consume(at(ids, 256))).policies, 0).remaining).toBe(0)
      expect(sent).toEqual([6])
      expect(await client.hExists(`${level}!2`, placed(limiter, at(ids, 256)).field)).toBeTruthy()
      // in a batch: the calls that need the levels go again whole, the others are decided at once
      const calls = [0, 257, 1, 258, 259].map((i) => at(ids, i))
      const batch = await Promise.all(calls.map((id) => limiter.consume(id)))
      expect(batch.map((d) => at(d.policies, 0).remaining)).toEqual([0, 1, 0, 1, 1])
      sent.length = 0
      expect((await Promise.all(calls.map((id) => limiter.consume(id)))).map((d) => d.allowed)).toEqual([
        false,
        true,
        false,
        true,
        true,
      ])
      // none went again: the pairs that needed the levels are sent whole from the start
      expect(sent).toHaveLength(2)
      expect(await client.hLen(`${level}!2`)).toBe(4)
    }, 120_000) // finding identities of one bucket is CPU work: slow on a loaded machine
  }

  it("levels below the first count only while their expiry is the first level's", async () => {
    await clearOfBoundary(DAY, 60_000)
    const limiter = limiterOf({
      store: store(),
      prefix: uniquePrefix('cstale'),
      limit: 2,
      window: '1d',
      algorithm: 'fixed-window',
    })
    const ids = sameBucket(limiter, 258)
    for (const id of ids.slice(0, 258)) await limiter.consume(id)
    const { level } = placed(limiter, at(ids, 0))
    const end = (Math.floor((await serverMs()) / DAY) + 1) * DAY
    expect(await client.hLen(`${level}!2`)).toBe(2)
    // level 2 as a first level that started again would leave it: another window's expiry
    await client.sendCommand(['PEXPIREAT', `${level}!2`, String(end + DAY)])
    // its counts no longer count: the identity starts again, in a level 2 that starts again
    expect(at((await limiter.consume(at(ids, 256))).policies, 0).remaining).toBe(1)
    expect(await client.hLen(`${level}!2`)).toBe(1)
    expect(Number(await client.sendCommand(['PEXPIRETIME', `${level}!2`]))).toBe(end)
    expect(at((await limiter.consume(at(ids, 256))).policies, 0).remaining).toBe(0)
    // a first level that starts again leaves the levels below in place
    await client.del(level)
    await limiter.consume(at(ids, 0))
    expect(await client.hLen(level)).toBe(1)
    expect(await client.hLen(`${level}!2`)).toBe(1)
  }, 120_000)

  it('a reset or a refund to zero keeps the field in place, so identities of the next level stay counted', async () => {
    await clearOfBoundary(DAY, 60_000)
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      const limiter = limiterOf({
        store: store(),
        prefix: uniquePrefix('ck'),
        limit: 2,
        window: '1d',
        algorithm,
      })
      const ids = sameBucket(limiter, 300)
      await Promise.all(ids.map((id) => limiter.consume(id)))
      const { level } = placed(limiter, at(ids, 0))
      const second = Object.keys(await client.hGetAll(`${level}!2`))
      expect(second).toHaveLength(44)
      await limiter.reset(at(ids, 0))
      await limiter.refund(await limiter.consume(at(ids, 1)))
      await limiter.refund(await limiter.consume(at(ids, 1)))
      expect(await client.hLen(level)).toBe(256)
      // every identity of level 2 still has one unit left, not two
      const later = ids.filter((id) => second.includes(placed(limiter, id).field))
      expect(later).toHaveLength(44)
      for (const id of later) expect((await limiter.peek(id)).remaining).toBe(1)
      expect((await limiter.peek(at(ids, 0))).remaining).toBe(2)
    }
  })

  it("a sliding window's roll packs the fields again: the next level's move up, none lost", async () => {
    const W = 2000
    const limiter = limiterOf({
      store: store(),
      prefix: uniquePrefix('cpack'),
      limit: 10,
      window: W,
      algorithm: 'sliding-window',
    })
    const ids = sameBucket(limiter, 300)
    const { level } = placed(limiter, at(ids, 0))
    for (let attempt = 0; ; attempt++) {
      await Promise.all(ids.map((id) => limiter.reset(id)))
      await client.del([level, `${level}!2`, `${level}!3`])
      await clearOfBoundary(W, 600)
      const started = Date.now()
      await Promise.all(ids.map((id) => limiter.consume(id)))
      // into the next window: one more spend rolls the bucket
      await sleepAtLeast(W - (Date.now() % W) + 50)
      await limiter.consume(at(ids, 299))
      const [one, two] = [await client.hGetAll(level), await client.hGetAll(`${level}!2`)]
      if (crossedBoundary(started, 2 * W) && attempt < 3) continue
      expect(Object.keys(one)).toHaveLength(256)
      expect(Object.keys(two)).toHaveLength(44)
      const values = [...Object.values(one), ...Object.values(two)]
      const q = (Math.floor(started / W) + 1) % 2
      // 299 fields hold their previous window's 1, the one that spent now 1 in each window
      expect(values.filter((v) => v === stored(q, 0, 1))).toHaveLength(299)
      expect(values.filter((v) => v === stored(q, 1, 1))).toHaveLength(1)
      break
    }
  }, 30_000)

  it("a sliding window's first write in a new window rolls its level: counts become the previous window's", async () => {
    const W = 2000
    const limiter = limiterOf({
      store: store(),
      prefix: uniquePrefix('croll'),
      limit: 10,
      window: W,
      algorithm: 'sliding-window',
    })
    const [a, b, c] = take(sameBucket(limiter, 3), 3)
    const { level, field } = placed(limiter, a)
    const fieldB = placed(limiter, b).field
    const fieldC = placed(limiter, c).field
    for (let attempt = 0; ; attempt++) {
      await limiter.reset(a)
      await limiter.reset(b)
      await limiter.reset(c)
      await clearOfBoundary(W, 400)
      const started = Date.now()
      await limiter.consume(a, { cost: 2 })
      await limiter.consume(b, { cost: 1 })
      // into the next window, then a new identity's spend rolls the level
      await sleepAtLeast(W - (Date.now() % W) + 100)
      const next = Date.now()
      await limiter.consume(c)
      const got = await client.hmGet(level, [field, fieldB, fieldC])
      const left = (await limiter.peek(a)).remaining
      if (crossedBoundary(started, 2 * W) || crossedBoundary(next, W)) {
        if (attempt < 3) continue // the machine stalled past a boundary it must not cross
      }
      const q = Math.floor(next / W) % 2
      expect(got).toEqual([stored(q, 0, 2), stored(q, 0, 1), stored(q, 1, 0)])
      // the previous window's 2 still weigh while this window lasts
      expect(left).toBeLessThanOrEqual(9)
      expect(left).toBeGreaterThanOrEqual(8)
      break
    }
  }, 30_000)

  it('reserve draws its units from compact counters, and the limit holds', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('cres')
    const options = { prefix, limit: 25, window: '1d', algorithm: 'fixed-window', reserve: 10 } as const
    const one = limiterOf({ store: store(), ...options })
    const two = limiterOf({ store: store(), ...options })
    let admitted = 0
    for (let i = 0; i < 20; i++) {
      if ((await one.consume('tenant')).allowed) admitted++
      if ((await two.consume('tenant')).allowed) admitted++
    }
    expect(admitted).toBe(25)
    const { level, field } = placed(one, 'tenant')
    expect(await client.hGet(level, field)).toBe('25')
  })

  it('every process with the secret finds the same counts; another secret puts identities elsewhere', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('cs')
    const one = limiterOf({ store: store(), prefix, limit: 5, window: '1d' })
    const two = limiterOf({ store: store(), prefix, limit: 5, window: '1d' })
    await one.consume('x', { cost: 2 })
    expect((await two.peek('x')).remaining).toBe(3)
    // another secret would put 'x' elsewhere, under another prefix
    const elsewhere = limiterOf({
      store: store('another-secret-of-16'),
      prefix: uniquePrefix('cs'),
      limit: 5,
      window: '1d',
    })
    expect((await elsewhere.peek('x')).remaining).toBe(5)
  })

  it('a process with another secret on a prefix is refused, loudly and naming the prefix, not counted apart', async () => {
    await clearOfBoundary(DAY, 60_000)
    const prefix = uniquePrefix('cmix')
    const events: unknown[] = []
    const options = {
      prefix,
      limit: 5,
      window: '1d',
      algorithm: 'fixed-window',
      onStoreError: 'deny',
    } as const
    const one = limiterOf({ store: store(), ...options })
    const other = limiterOf({
      store: store('another-secret-of-16'),
      ...options,
      onEvent: (e) => events.push(e),
    })
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => {})
    try {
      let admitted = 0
      for (let i = 0; i < 6; i++) if ((await one.consume('x')).allowed) admitted++
      for (let i = 0; i < 6; i++) {
        const d = await other.consume('x')
        if (d.allowed) admitted++
        expect(d.source).toBe('fallback')
      }
      expect(admitted).toBe(5)
      expect(events[0]).toMatchObject({ type: 'store-error', prefix })
      const said = new RegExp(
        `storage: 'compact' on prefix '${prefix}': Redis holds another secret's fingerprint`,
      )
      expect(String((events[0] as { error: Error }).error.message)).toMatch(said)
      // once per prefix on the console, with a code to search for
      expect(
        warn.mock.calls.filter((c) => String(c[0]).includes('ERR_TOLLGATE_COMPACT_SECRET')),
      ).toHaveLength(1)
      // a reset with the other secret is refused too (it would zero another identity's field)
      const third = limiterOf({ store: store('another-secret-of-16'), ...options })
      await expect(third.reset('x')).rejects.toThrow(said)
      expect((await one.peek('x')).remaining).toBe(0)
      // the first process goes on
      expect((await one.consume('x')).allowed).toBe(false)
    } finally {
      warn.mockRestore()
    }
  })

  it("keeps a prefix's secret as a fingerprint that expires, never the secret; deleting it lets a new secret in", async () => {
    const prefix = uniquePrefix('cfp')
    const limiter = limiterOf({ store: store(), prefix, limit: 5, window: '1d' })
    await limiter.consume('x')
    const key = `${prefix}:{~h:s}`
    const held = await client.get(key)
    expect(held).toBe(new CompactLayout(SECRET).fingerprint)
    expect(held).toMatch(/^[0-9a-f]{16}$/)
    // as docs/scripts.md computes it: format(siphash24(key, b'tollgate:compact-secret:8192'), '016x')
    expect(new CompactLayout('the-store-secret-1234').fingerprint).toBe('7fe3f9620639097a')
    expect(held).not.toBe(new CompactLayout('another-secret-of-16').fingerprint)
    const ttl = await client.pTTL(key)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(SECRET_TTL_MS)
    // the documented rotation: every process on the old secret stopped, the key deleted
    await client.del(key)
    const rotated = limiterOf({ store: store('the-rotated-secret-16'), prefix, limit: 5, window: '1d' })
    expect((await rotated.consume('x')).allowed).toBe(true)
    expect(await client.get(key)).toBe(new CompactLayout('the-rotated-secret-16').fingerprint)
  })

  it('spreads buckets over the slots and keeps one identity in one slot for all its policies', () => {
    const limiter = limiterOf({
      store: store(),
      prefix: 'spread',
      policies: {
        second: { limit: 5, window: '1s' },
        day: { limit: 500, window: '1d', algorithm: 'sliding-window' },
      },
    })
    const slots = new Set<number>()
    for (let i = 0; i < 200; i++) {
      const keys = limiter.keysFor({ second: `u${i}`, day: `u${i}` })
      const mapped = layout.map(keys.map((key) => ({ policy: POLICY, key })))
      expect(keySlot(at(mapped, 0).key)).toBe(keySlot(at(mapped, 1).key))
      slots.add(keySlot(at(mapped, 0).key))
    }
    expect(slots.size).toBeGreaterThan(150)
    expect(BUCKETS).toBe(8192)
  })

  it('refuses a short or stray secret and an unknown storage at construction', () => {
    expect(() => new RedisStore(client, { storage: 'compact', secret: 'short' })).toThrow(ConfigError)
    expect(() => new RedisStore(client, { storage: 'compact', secret: 'short' })).toThrow(
      /secret must be a string of at least 16 characters.*received "5 characters"/,
    )
    expect(() => new RedisStore(client, { secret: 'a-secret-of-sixteen' })).toThrow(
      /secret must be given only/,
    )
    expect(() => new RedisStore(client, { storage: 'hashes' as never })).toThrow(/storage must be one of/)
  })
})

describe('storage: compact, four processes on the fields of one bucket', () => {
  let race: RaceHandle
  beforeAll(async () => {
    race = await startRace({
      workers: 4,
      module: join(__dirname, '../../../test/fixtures/compact-race-module.ts'),
      setupArgs: { url: redisUrl() },
      timeoutMs: 60_000,
    })
  }, 60_000)
  afterAll(async () => {
    await race?.close()
  })

  it.each(['fixed-window', 'sliding-window'] as const)(
    '%s: 600 identities of one bucket, limit 2, each tried 4 times: exactly 2 each, over three levels',
    async (algorithm) => {
      await clearOfBoundary(DAY, 120_000)
      const prefix = uniquePrefix('crace')
      const limiter = limiterOf({ store: store(), prefix, limit: 2, window: '1d', algorithm })
      const ids = sameBucket(limiter, 600)
      const r = await race.round({ prefix, algorithm, ids }, ids.length)
      expect(r.errorSamples).toEqual([])
      expect(r.admitted).toBe(1200)
      const { level } = placed(limiter, at(ids, 0))
      const counts = [
        ...Object.values(await client.hGetAll(level)),
        ...Object.values(await client.hGetAll(`${level}!2`)),
        ...Object.values(await client.hGetAll(`${level}!3`)),
      ]
      expect(counts).toHaveLength(600) // each identity in one level only
      const two = algorithm === 'fixed-window' ? '2' : stored(Math.floor((await serverMs()) / DAY) % 2, 2, 0)
      expect(counts.every((c) => c === two)).toBe(true)
      expect(await client.hLen(level)).toBe(256)
      expect(await client.hLen(`${level}!2`)).toBe(256)
    },
    60_000,
  )
})
