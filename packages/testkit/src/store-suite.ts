/**
 * The store conformance suite: the same expectations for every `Store` (MemoryStore, RedisStore over
 * node-redis RESP2/RESP3, ioredis, and a cluster). Call it inside a test file:
 *
 *   describeStore('RedisStore (ioredis)', async () => ({ store, close, pttl, exists, zcard }))
 * @module
 */
import { type Algorithm, type Decision, MemoryStore, RateLimiter, type Store } from '@tollgate/core'

export interface StoreFixture {
  store: Store
  close(): Promise<void>
  /** Redis only: PTTL of a key in ms (-2 missing, -1 no TTL). */
  pttl?(key: string): Promise<number>
  /** Redis only: whether a key exists. */
  exists?(key: string): Promise<boolean>
  /** Redis only: ZCARD. */
  zcard?(key: string): Promise<number>
  /** The limiters' deadline, for stores slower than a local socket (Redis over HTTP on a busy machine). */
  timeoutMs?: number
  /**
   * The window of the tests that wait for time to pass (retry-after honesty, TTL expiry), for stores whose
   * calls take a sizeable part of the default (a few REST round trips on a busy machine).
   * @default 300 and 250
   */
  shortWindowMs?: number
}

export const ALL_ALGORITHMS: readonly Algorithm[] = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'gcra',
]

/** The longest TTL each algorithm may leave on a key, in windows (+ slack ms). */
const TTL_BOUND: Record<Algorithm, (windowMs: number) => number> = {
  'fixed-window': (w) => w,
  'sliding-window': (w) => 2 * w,
  'sliding-log': (w) => w + 1,
  // The expiry is the time the bucket is full again, rounded up to Redis' whole milliseconds.
  'token-bucket': (w) => w + 1,
  gcra: (w) => w + 1,
  // The newest lease's expiry (a lease is `window` long).
  concurrency: (w) => w,
}

let counter = 0
/** A prefix no other test uses. */
export const uniquePrefix = (name: string): string =>
  `t${process.pid}x${Date.now().toString(36)}x${counter++}x${name}`

import { crossedBoundary, sleepAtLeast as sleep } from './time'

const seq = async (limiter: RateLimiter, key: string, n: number, cost = 1): Promise<Decision[]> => {
  const out: Decision[] = []
  for (let i = 0; i < n; i++) out.push(await limiter.consume(key, { cost }))
  return out
}

/** Registers the conformance tests for one store. */
export function describeStore(name: string, makeFixture: () => Promise<StoreFixture>): void {
  describe(`store conformance: ${name}`, () => {
    let fx: StoreFixture
    beforeAll(async () => {
      fx = await makeFixture()
    })
    afterAll(async () => {
      await fx?.close()
    })

    // Day-long windows by default: windows are aligned to the epoch, and a boundary crossed in the middle
    // of a test (likely enough with minute windows over a few hundred tests) would change its numbers.
    const make = (algorithm: Algorithm, limit = 5, window: number | '1d' = '1d') =>
      new RateLimiter({
        store: fx.store,
        prefix: uniquePrefix(algorithm),
        limit,
        window,
        algorithm,
        timeoutMs: fx.timeoutMs,
      })

    describe.each(ALL_ALGORITHMS)('%s', (algorithm) => {
      it('counts down 4,3,2,1,0 then refuses with an honest retry time', async () => {
        const limiter = make(algorithm)
        const ds = await seq(limiter, 'user:1', 6)
        expect(ds.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0, 0])
        expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, false])
        expect(ds[0].limit).toBe(5)
        expect(ds[4].retryAfterMs).toBe(0)
        expect(ds[5].retryAfterMs).toBeGreaterThan(0)
        expect(ds[5].retryAfterMs).toBeLessThanOrEqual(2 * 86_400_000)
        expect(ds[5].policies).toHaveLength(1)
        expect(ds[5].policies[0]).toMatchObject({
          policy: 'default',
          allowed: false,
          limit: 5,
          windowMs: 86_400_000,
        })
      })

      it('weighs costs and a refusal costs nothing', async () => {
        const limiter = make(algorithm)
        expect((await limiter.consume('k', { cost: 2 })).remaining).toBe(3)
        const refused = await limiter.consume('k', { cost: 4 })
        expect(refused.allowed).toBe(false)
        expect(refused.remaining).toBe(3)
        expect((await limiter.consume('k', { cost: 3 })).remaining).toBe(0)
        expect((await limiter.consume('k', { cost: 1 })).allowed).toBe(false)
      })

      it('refuses a cost above the limit forever, spending nothing', async () => {
        const limiter = make(algorithm)
        const d = await limiter.consume('k', { cost: 6 })
        expect(d.allowed).toBe(false)
        expect(d.retryAfterMs).toBe(Number.POSITIVE_INFINITY)
        expect((await limiter.peek('k')).remaining).toBe(5)
      })

      it('counts a large cost exactly (no Lua stack limit, no fail-open path)', async () => {
        const limiter = make(algorithm, 10_000, '1d') // a day: gcra and the bucket refill nothing meanwhile
        const a = await limiter.consume('k', { cost: 6000 })
        expect(a).toMatchObject({ allowed: true, remaining: 4000, source: 'store' })
        expect(await limiter.consume('k', { cost: 5000 })).toMatchObject({ allowed: false, remaining: 4000 })
        await limiter.refund(a)
        expect((await limiter.peek('k')).remaining).toBe(10_000)
      })

      it('a cost of 0 is admitted and spends nothing', async () => {
        const limiter = make(algorithm)
        await limiter.consume('k', { cost: 2 })
        const d = await limiter.consume('k', { cost: 0 })
        expect(d.allowed).toBe(true)
        expect(d.remaining).toBe(3)
      })

      it('peek does not spend', async () => {
        const limiter = make(algorithm)
        for (let i = 0; i < 3; i++) expect((await limiter.peek('k')).remaining).toBe(5)
        expect((await limiter.consume('k')).remaining).toBe(4)
        const p = await limiter.peek('k', { cost: 4 })
        expect(p).toMatchObject({ allowed: true, remaining: 4 })
        expect((await limiter.peek('k', { cost: 5 })).allowed).toBe(false)
        expect((await limiter.consume('k')).remaining).toBe(3)
      })

      it('refunds give back the spend and clamp at the full quota', async () => {
        const limiter = make(algorithm)
        const a = await limiter.consume('k', { cost: 2 })
        const b = await limiter.consume('k', { cost: 1 })
        expect(b.remaining).toBe(2)
        await limiter.refund(a)
        expect((await limiter.peek('k')).remaining).toBe(4)
        await limiter.refund(b)
        await limiter.refund(b) // twice: never above the quota
        await limiter.refund(a)
        expect((await limiter.peek('k')).remaining).toBe(5)
        const c = await limiter.consume('k', { cost: 3 })
        await limiter.refund(c, { cost: 1 })
        expect((await limiter.peek('k')).remaining).toBe(3)
      })

      it('refunding a refused decision is a no-op', async () => {
        const limiter = make(algorithm)
        await seq(limiter, 'k', 5)
        const refused = await limiter.consume('k')
        expect(refused.allowed).toBe(false)
        await limiter.refund(refused)
        expect((await limiter.peek('k')).remaining).toBe(0)
      })

      it('reset forgets the state', async () => {
        const limiter = make(algorithm)
        await seq(limiter, 'k', 5)
        await limiter.reset('k')
        expect((await limiter.consume('k')).remaining).toBe(4)
      })

      it('keys of different identities are independent', async () => {
        const limiter = make(algorithm)
        await seq(limiter, 'a', 5)
        expect((await limiter.consume('a')).allowed).toBe(false)
        expect((await limiter.consume('b')).remaining).toBe(4)
      })

      it('sleeping retryAfterMs then retrying is admitted', async () => {
        // The 4th call's refusal lapses no sooner than windowMs / limit after the first call (a unit of
        // gcra or token-bucket comes back, sliding-window's weighted count drops by one, sliding-log needs
        // the whole window), or at an aligned boundary for a fixed window. A window of 3 x the short
        // window puts that far beyond four calls on a loaded machine, and the sleep stays under 2 windows.
        const limit = 3
        const windowMs = 3 * (fx.shortWindowMs ?? 300)
        for (let attempt = 1; ; attempt++) {
          const limiter = make(algorithm, limit, windowMs)
          const started = Date.now()
          await seq(limiter, 'k', limit)
          const refused = await limiter.consume('k')
          // A round slower than that, or across a boundary, may rightly admit the 4th call: tried again,
          // by the clock Redis and the test share.
          const lapsed =
            Date.now() - started >= windowMs / limit ||
            (algorithm === 'fixed-window' && crossedBoundary(started, windowMs))
          if (refused.allowed && lapsed && attempt < 5) continue
          expect(refused.allowed).toBe(false)
          await sleep(refused.retryAfterMs)
          expect((await limiter.consume('k')).allowed).toBe(true)
          return
        }
      })

      it('leaves TTLs no longer than the algorithm needs, and nothing once idle', async () => {
        if (!fx.pttl || !fx.exists) return
        const windowMs = fx.shortWindowMs ?? 250
        const limiter = make(algorithm, 5, windowMs)
        await seq(limiter, 'k', 5)
        const [key] = limiter.keysFor('k')
        const ttl = await fx.pttl(key)
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(TTL_BOUND[algorithm](windowMs))
        await sleep(TTL_BOUND[algorithm](windowMs) + 30)
        expect(await fx.exists(key)).toBe(false)
      })
    })

    it('sliding-log never stores refused requests nor grows past the limit', async () => {
      if (!fx.zcard) return
      const limiter = make('sliding-log', 5, 200)
      const [key] = limiter.keysFor('k')
      for (let round = 0; round < 3; round++) {
        await seq(limiter, 'k', 20)
        expect(await fx.zcard(key)).toBeLessThanOrEqual(5)
        await sleep(120)
      }
    })

    describe('several policies in one call', () => {
      const makeLogin = () =>
        new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix('login'),
          timeoutMs: fx.timeoutMs,
          policies: {
            ip: { limit: 5, window: '1d' },
            account: { limit: 2, window: '1d', algorithm: 'fixed-window' },
          },
        })

      it('charges every policy, or none when one refuses', async () => {
        const login = makeLogin()
        const key = { ip: 'ip:1.2.3.4', account: 'email:a@b.c' }
        const a = await login.consume(key)
        expect(a.policies.map((p) => [p.policy, p.remaining])).toEqual([
          ['ip', 4],
          ['account', 1],
        ])
        expect(a).toMatchObject({ allowed: true, limit: 2, remaining: 1 }) // binding: fewest left
        await login.consume(key)
        const refused = await login.consume(key)
        expect(refused.allowed).toBe(false)
        expect(refused.limit).toBe(2)
        expect(refused.policies.find((p) => p.policy === 'ip')).toMatchObject({ allowed: true, remaining: 3 })
        // the refused call did not charge the ip policy
        const other = await login.consume({ ip: 'ip:1.2.3.4', account: 'email:other' })
        expect(other.policies[0].remaining).toBe(2)
      })

      it('refunds every policy of an admitted call (attempt + refund on success)', async () => {
        const login = makeLogin()
        const key = { ip: 'ip:9', account: 'email:z' }
        for (let i = 0; i < 4; i++) {
          await login.attempt(key, async (a) => {
            await a.refund() // a successful login costs nothing
          })
        }
        const p = await login.peek(key)
        expect(p.policies.map((x) => x.remaining)).toEqual([5, 2])
      })

      it('one identity for every policy when the key is a string', async () => {
        const both = new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix('both'),
          timeoutMs: fx.timeoutMs,
          policies: {
            burst: { limit: 2, window: '1h' }, // long enough that no window boundary falls inside the test
            daily: { limit: 3, window: '1d', algorithm: 'fixed-window' },
          },
        })
        const ds = await seq(both, 'user:7', 3)
        expect(ds.map((d) => d.allowed)).toEqual([true, true, false])
        expect(ds[2].policies.map((p) => p.policy)).toEqual(['burst', 'daily'])
        expect(ds[2].policies[1].remaining).toBe(1)
      })
    })

    describe('penalties', () => {
      const DAY = 86_400_000
      const penalised = (
        algorithm: Algorithm,
        limit: number,
        penalty: object,
        window: number | '1d' = '1d',
      ) =>
        new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix(`pen-${algorithm}`),
          timeoutMs: fx.timeoutMs,
          denyCache: false,
          limit,
          window,
          algorithm,
          penalty: penalty as never,
        })

      it.each(ALL_ALGORITHMS)(
        '%s: the second refusal starts a block; peek reports it, a refund does not lift it, reset does',
        async (algorithm) => {
          const limiter = penalised(algorithm, 2, { after: 2, block: '2d' })
          const [first] = await seq(limiter, 'k', 2)
          const refused = await limiter.consume('k')
          expect(refused).toMatchObject({ allowed: false })
          expect(refused.policies[0].blocked).toBeUndefined()
          expect(refused.retryAfterMs).toBeLessThanOrEqual(2 * DAY)
          const blocking = await limiter.consume('k')
          // the refusal that starts the block says so, with the block's length
          expect(blocking).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 2 * DAY })
          expect(blocking.policies[0]).toMatchObject({ blocked: true, retryAfterMs: 2 * DAY })
          const peeked = await limiter.peek('k')
          expect(peeked.allowed).toBe(false)
          expect(peeked.policies[0].blocked).toBe(true)
          expect(peeked.retryAfterMs).toBeGreaterThan(DAY)
          await limiter.refund(first)
          const still = await limiter.consume('k')
          expect(still).toMatchObject({ allowed: false, remaining: 0 })
          expect(still.retryAfterMs).toBeGreaterThan(DAY)
          await limiter.reset('k')
          expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 1 })
        },
      )

      it('a block lasts its time, then admits; repeat offences grow by factor up to max', async () => {
        // A refusal's retry is the longer of the policy's and the block's: a policy that refills within
        // 200 ms keeps the block's length visible.
        const limiter = penalised('gcra', 1, { block: 250, factor: 2, max: 600 }, 200)
        const lengths: number[] = []
        for (let i = 0; i < 4; i++) {
          let d = await limiter.consume('k')
          while (d.allowed) d = await limiter.consume('k') // the first refusal is an offence (after: 1)
          expect(d.policies[0].blocked).toBe(true)
          lengths.push(d.retryAfterMs)
          const during = await limiter.consume('k')
          expect(during).toMatchObject({ allowed: false })
          expect(during.retryAfterMs).toBeLessThanOrEqual(d.retryAfterMs)
          await sleep(d.retryAfterMs)
        }
        expect(lengths).toEqual([250, 500, 600, 600])
        await limiter.reset('k')
        expect((await limiter.consume('k')).allowed).toBe(true)
      })

      it('a block ends when its time is up: the next request the policy admits goes through', async () => {
        // a unit refills every window / 2: long enough that none can refill between the three calls
        const limiter = penalised('token-bucket', 2, { block: 150 }, Math.max(1000, fx.shortWindowMs ?? 0))
        await seq(limiter, 'k', 2)
        const blocking = await limiter.consume('k')
        // the longer of the block and the policy's own wait (a slow store's test window can be longer)
        expect(blocking).toMatchObject({ allowed: false })
        expect(blocking.policies[0].blocked).toBe(true)
        expect(blocking.retryAfterMs).toBeGreaterThanOrEqual(150)
        await sleep(blocking.retryAfterMs)
        expect((await limiter.consume('k')).allowed).toBe(true)
      })

      it('blocks one (policy, identity) pair in a call of several policies, and batches alike', async () => {
        const login = new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix('pen-login'),
          timeoutMs: fx.timeoutMs,
          denyCache: false,
          policies: {
            ip: { limit: 20, window: '1d' },
            account: { limit: 2, window: '1d', algorithm: 'gcra', penalty: { block: '2d' } },
          },
        })
        const victim = { ip: 'ip:1', account: 'email:v' }
        // one turn: a batch on a batching store, evaluated in order
        const ds = await Promise.all([1, 2, 3, 4, 5].map(() => login.consume(victim)))
        expect(ds.map((d) => d.allowed)).toEqual([true, true, false, false, false])
        expect(ds[2].retryAfterMs).toBe(2 * DAY)
        for (const d of ds.slice(2)) {
          expect(d.policies[1]).toMatchObject({ policy: 'account', allowed: false, blocked: true })
          expect(d.retryAfterMs).toBeGreaterThan(DAY)
          // (on a cluster the two identities live in two slots: the ip spend is given back after the refusal)
          expect(d.policies[0]).toMatchObject({ policy: 'ip', allowed: true })
        }
        // the ip pair is not blocked: another account from the same ip goes through
        const other = await login.consume({ ip: 'ip:1', account: 'email:other' })
        expect(other.allowed).toBe(true)
        expect(other.policies[0].remaining).toBe(17)
        await login.reset(victim)
        expect((await login.consume(victim)).allowed).toBe(true)
      })

      it('peek never counts a refusal; a cost above the limit is not an offence', async () => {
        const limiter = penalised('sliding-window', 1, { block: '2d' })
        await limiter.consume('k')
        for (let i = 0; i < 3; i++) expect((await limiter.peek('k')).policies[0].blocked).toBeUndefined()
        const never = await limiter.consume('k', { cost: 2 })
        expect(never.retryAfterMs).toBe(Number.POSITIVE_INFINITY)
        expect((await limiter.peek('k')).policies[0].blocked).toBeUndefined()
      })

      it('the penalty state expires with the block (no lasting key)', async () => {
        if (!fx.pttl) return
        const limiter = penalised('fixed-window', 1, { block: 5000 })
        await seq(limiter, 'k', 2)
        const ttl = await fx.pttl(`${limiter.keysFor('k')[0]}!p`)
        expect(ttl).toBeGreaterThan(0)
        expect(ttl).toBeLessThanOrEqual(5000)
      })
    })

    describe.each(ALL_ALGORITHMS)('settle: %s', (algorithm) => {
      it('charges the difference when the work cost more', async () => {
        const limiter = make(algorithm, 10)
        const d = await limiter.consume('k', { cost: 2 })
        await limiter.settle(d, 7)
        expect((await limiter.peek('k')).remaining).toBe(3)
      })

      it('gives the difference back when the work cost less, never below zero usage', async () => {
        const limiter = make(algorithm, 10)
        const d = await limiter.consume('k', { cost: 6 })
        await limiter.settle(d, 1)
        expect((await limiter.peek('k')).remaining).toBe(9)
        const e = await limiter.consume('k', { cost: 3 })
        await limiter.settle(e, 0)
        expect((await limiter.peek('k')).remaining).toBe(9)
      })

      it('applies once: a repeated settle, or one after a refund, changes nothing more', async () => {
        const limiter = make(algorithm, 10)
        const d = await limiter.consume('k', { cost: 1 })
        await limiter.settle(d, 4)
        await limiter.settle(d, 4)
        await limiter.settle(d, 9)
        await limiter.refund(d) // settled: nothing to give back
        expect((await limiter.peek('k')).remaining).toBe(6)
        const e = await limiter.consume('k', { cost: 2 })
        await limiter.refund(e, { cost: 1 })
        await limiter.settle(e, 5) // refunded: the spend stays as the refund left it
        expect((await limiter.peek('k')).remaining).toBe(5)
        // settles of one decision sent in one turn (one batched script on a batching store)
        const f = await limiter.consume('k', { cost: 1 })
        await Promise.all([limiter.settle(f, 3), limiter.settle(f, 3), limiter.peek('k')])
        expect((await limiter.peek('k')).remaining).toBe(2)
      })

      it('an overdraft past the limit refuses until it drains', async () => {
        const limiter = make(algorithm, 5)
        const d = await limiter.consume('k', { cost: 1 })
        await limiter.settle(d, 8) // three units past the limit
        const peeked = await limiter.peek('k')
        expect(peeked.remaining).toBe(0)
        const refused = await limiter.consume('k')
        expect(refused.allowed).toBe(false)
        expect(refused.retryAfterMs).toBeGreaterThan(0)
        if (algorithm === 'token-bucket' || algorithm === 'gcra') {
          // one unit every day / 5: the debt of 3 and the unit asked for drain first
          expect(refused.retryAfterMs).toBeGreaterThan((4 * 86_400_000) / 5 - 1_000)
        }
        // a refusal spends nothing, and the overdraft is not given back by one
        expect((await limiter.peek('k')).remaining).toBe(0)
      })

      it('never reaches into a newer window: a settle after the spend has drained is dropped', async () => {
        const windowMs = fx.shortWindowMs ?? 300
        const limiter = make(algorithm, 5, windowMs)
        const d = await limiter.consume('k', { cost: 1 })
        // two windows later every algorithm has forgotten the spend (the sliding window's previous
        // window included; a TAT's over-charge is at most one burst, drained by then)
        await sleep(2 * windowMs + 20)
        await limiter.settle(d, 5)
        expect((await limiter.peek('k')).remaining).toBe(5)
      })

      it('settles every policy of the call at once', async () => {
        const limiter = new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix('settle'),
          policies: {
            requests: { limit: 10, window: '1d', algorithm: 'fixed-window' },
            tokens: { limit: 100, window: '1d', algorithm },
          },
          timeoutMs: fx.timeoutMs,
        })
        const d = await limiter.consume('k', { cost: 10 })
        await limiter.settle(d, 40)
        const after = await limiter.peek('k')
        expect(after.policies.map((p) => p.remaining)).toEqual([0, 60])
        const e = await limiter.consume({ requests: 'a', tokens: 'b' }, { cost: 5 })
        await limiter.settle(e, 2)
        const other = await limiter.peek({ requests: 'a', tokens: 'b' })
        expect(other.policies.map((p) => p.remaining)).toEqual([8, 98])
      })
    })

    describe('settle', () => {
      it('leaves concurrency leases alone and charges the rate policies', async () => {
        const limiter = new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix('settle-conc'),
          policies: {
            tokens: { limit: 100, window: '1d', algorithm: 'gcra' },
            open: { algorithm: 'concurrency', concurrency: 100, lease: '1d' },
          },
          timeoutMs: fx.timeoutMs,
        })
        const d = await limiter.consume('k', { cost: 10 })
        await limiter.settle(d, 30)
        expect((await limiter.peek('k')).policies.map((p) => p.remaining)).toEqual([70, 90])
        await limiter.release(d)
        expect((await limiter.peek('k')).policies.map((p) => p.remaining)).toEqual([70, 100])
      })

      it('is a no-op for refused decisions and rejects a bad actual cost before the store', async () => {
        const limiter = make('fixed-window', 2)
        await limiter.consume('k', { cost: 2 })
        const refused = await limiter.consume('k')
        await limiter.settle(refused, 0)
        expect((await limiter.peek('k')).remaining).toBe(0)
        for (const bad of [-1, 1.5, Number.NaN, '3', undefined]) {
          await expect(limiter.settle(refused, bad as number)).rejects.toMatchObject({
            name: 'InputError',
          })
        }
      })

      it('settles under the per-call limits the spend was made under', async () => {
        const limiter = make('sliding-window', 5)
        const d = await limiter.consume('k', { cost: 1, limits: 50 })
        await limiter.settle(d, 30)
        expect((await limiter.peek('k', { limits: 50 })).remaining).toBe(20)
      })
    })

    describe('concurrency', () => {
      const leases = (concurrency = 3, lease: number | '1d' = '1d') =>
        new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix('conc'),
          concurrency,
          lease,
          timeoutMs: fx.timeoutMs,
        })

      it('holds at most N at once; a release frees a slot at once', async () => {
        const limiter = leases(3)
        const held = await seq(limiter, 'k', 3)
        expect(held.map((d) => d.remaining)).toEqual([2, 1, 0])
        const refused = await limiter.consume('k')
        expect(refused).toMatchObject({ allowed: false, remaining: 0 })
        expect(refused.policies[0]).toMatchObject({ algorithm: 'concurrency', limit: 3 })
        // the lease's expiry bounds the wait: an upper bound, a release comes sooner
        expect(refused.retryAfterMs).toBeGreaterThan(0)
        expect(refused.retryAfterMs).toBeLessThanOrEqual(86_400_000)
        await limiter.release(held[1])
        expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 0 })
        expect((await limiter.consume('k')).allowed).toBe(false)
      })

      it('a release is once: repeating it frees no other lease', async () => {
        const limiter = leases(2)
        const [a] = await seq(limiter, 'k', 2)
        await limiter.release(a)
        await limiter.release(a)
        await limiter.release({ ...a }) // a copy of the decision too (another process could send it)
        await limiter.refund(a)
        expect((await limiter.consume('k')).allowed).toBe(true)
        expect((await limiter.consume('k')).allowed).toBe(false)
      })

      it('weighs costs, refuses a cost above N forever, and a refused call takes nothing', async () => {
        const limiter = leases(5)
        const big = await limiter.consume('k', { cost: 3 })
        expect(big.remaining).toBe(2)
        expect((await limiter.consume('k', { cost: 3 })).allowed).toBe(false)
        const never = await limiter.consume('k', { cost: 6 })
        expect(never.retryAfterMs).toBe(Number.POSITIVE_INFINITY)
        expect((await limiter.peek('k')).remaining).toBe(2)
        await limiter.release(big)
        expect((await limiter.peek('k')).remaining).toBe(5)
      })

      it('an unreleased lease expires: the slot comes back after the lease, not before', async () => {
        const lease = fx.shortWindowMs ?? 300
        const limiter = leases(1, lease)
        const held = await limiter.consume('k')
        const refused = await limiter.consume('k')
        expect(refused.allowed).toBe(false)
        expect(refused.retryAfterMs).toBeLessThanOrEqual(lease)
        await sleep(refused.retryAfterMs)
        const next = await limiter.consume('k')
        expect(next.allowed).toBe(true)
        await limiter.release(held) // after its expiry: harmless, the new lease stays
        expect((await limiter.consume('k')).allowed).toBe(false)
        await limiter.release(next)
        if (fx.exists) expect(await fx.exists(limiter.keysFor('k')[0])).toBe(false) // nothing left
      })

      it('with a rate policy: all or nothing in one call', async () => {
        const both = new RateLimiter({
          store: fx.store,
          prefix: uniquePrefix('conc-rate'),
          timeoutMs: fx.timeoutMs,
          policies: {
            rate: { limit: 2, window: '1d', algorithm: 'fixed-window' },
            inflight: { concurrency: 1, lease: '1d' },
          },
        })
        const first = await both.consume('k')
        expect(first.allowed).toBe(true)
        // concurrency refuses: the rate policy is not charged
        const busy = await both.consume('k')
        expect(busy.policies.map((p) => p.allowed)).toEqual([true, false])
        expect((await both.peek('k')).policies.map((p) => p.remaining)).toEqual([1, 0])
        await both.release(first)
        expect((await both.peek('k')).policies.map((p) => p.remaining)).toEqual([1, 1])
        const second = await both.consume('k')
        await both.release(second)
        // the rate policy refuses: no lease is taken
        const spent = await both.consume('k')
        expect(spent.policies.map((p) => p.allowed)).toEqual([false, true])
        expect((await both.peek('k')).policies.map((p) => p.remaining)).toEqual([0, 1])
      })
    })
  })
}

/** A MemoryStore fixture. */
export const memoryFixture = async (): Promise<StoreFixture> => ({
  store: new MemoryStore(),
  close: async () => {},
})
