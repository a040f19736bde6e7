/**
 * Batched decisions (RedisStore `batch`), on a redis-server of this file's own (the command counters are
 * server-wide): the calls of one turn become one script call, give the decisions the same calls give one
 * by one, and a failure reaches each call's own failure policy.
 */
import { at, type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import Redis from 'ioredis'
import { createClient } from 'redis'
import * as scripts from '../../entries/scripts'
import { type Decision, type KeyInput, RateLimiter, RedisStore } from '../../index'
import * as generated from '../../scripts/generated'
import { DEFAULT_BATCH_SIZE } from './batcher'

type Kind = 'node-redis' | 'ioredis'

let own: RedisServerHandle
const adminClient = (url: string) => createClient({ url }).on('error', () => {})
let admin: ReturnType<typeof adminClient>
beforeAll(async () => {
  own = await startRedisServer()
  admin = adminClient(own.url)
  await admin.connect()
})
afterAll(async () => {
  await admin?.quit()
  await own?.stop()
})

async function connect(kind: Kind, url = own.url): Promise<{ client: unknown; close: () => Promise<void> }> {
  if (kind === 'ioredis') {
    const client = new Redis(url, { maxRetriesPerRequest: 0 })
    client.on('error', () => {})
    await client.ping()
    return { client, close: async () => client.disconnect() }
  }
  const client = createClient({ url }).on('error', () => {})
  await client.connect()
  return {
    client,
    close: async () => {
      client.destroy()
    },
  }
}

/**
 * The deadline of the limiters whose script calls are counted: a call past its deadline aborts what the
 * client has not written and may drop a silent connection, which a loaded machine must not trigger here.
 */
const LONG = 60_000
// Every limiter here has `top: false`: a refusal's top tally goes to Redis as a script call about a second
// later, which would land in another test's count of script calls.

async function scriptCalls(): Promise<number> {
  const info = await admin.info('commandstats')
  let calls = 0
  for (const name of ['evalsha', 'eval']) {
    const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)
    if (m) calls += Number(m[1])
  }
  return calls
}

/**
 * Limiters of every algorithm, one and two policies, day-long windows (the server's clock cannot move
 * a result between two runs of the same sequence).
 */
function limiters(store: RedisStore, prefix: string): RateLimiter[] {
  const out: RateLimiter[] = []
  for (const algorithm of ALL_ALGORITHMS) {
    out.push(
      new RateLimiter({
        top: false,
        store,
        prefix: `${prefix}:${algorithm}:1`,
        limit: 3,
        window: '1d',
        algorithm,
        denyCache: false,
        timeoutMs: 5000,
      }),
    )
    out.push(
      new RateLimiter({
        top: false,
        store,
        prefix: `${prefix}:${algorithm}:2`,
        policies: {
          ip: { limit: 4, window: '1d', algorithm },
          account: { limit: 2, window: '1d', algorithm },
        },
        denyCache: false,
        timeoutMs: 5000,
      }),
    )
  }
  return out
}

type Step =
  | { op: 'consume'; l: number; key: KeyInput; cost?: number }
  | { op: 'peek'; l: number; key: KeyInput; cost?: number }
  | { op: 'refund'; of: number }

/** A sequence mixing admitted and refused consumes, peeks, costs 0-2, and (in phase 2) refunds. */
function steps(n: number, withRefunds: boolean): Step[] {
  const out: Step[] = []
  for (let i = 0; i < n; i++) {
    const l = i % 10
    const key: KeyInput = l % 2 === 0 ? `id:${i % 3}` : { ip: `ip:${i % 2}`, account: 'acct' }
    if (withRefunds && i % 5 === 0) out.push({ op: 'refund', of: i })
    else if (i % 7 === 3) out.push({ op: 'peek', l, key, cost: i % 3 })
    else out.push({ op: 'consume', l, key, cost: i % 11 === 0 ? 2 : i % 13 === 0 ? 0 : 1 })
  }
  return out
}

/** What a caller sees of a decision, with the clock-dependent numbers left out. */
function seen(d: Decision | undefined) {
  if (!d) return 'refund done'
  return {
    allowed: d.allowed,
    remaining: d.remaining,
    limit: d.limit,
    source: d.source,
    policies: d.policies.map((p) => ({ policy: p.policy, allowed: p.allowed, remaining: p.remaining })),
  }
}

function issue(ls: RateLimiter[], step: Step, earlier: Decision[]): Promise<Decision | undefined> {
  if (step.op === 'consume') return at(ls, step.l).consume(step.key, { cost: step.cost })
  if (step.op === 'peek') return at(ls, step.l).peek(step.key, { cost: step.cost })
  const d = at(earlier, step.of)
  return ownerOf
    .get(d)!
    .refund(d)
    .then(() => undefined)
}
const ownerOf = new WeakMap<Decision, RateLimiter>()

/** Runs phase 1 (consumes and peeks) then phase 2 (refunds of phase 1 among more calls). */
async function run(store: RedisStore, prefix: string, together: boolean) {
  const ls = limiters(store, prefix)
  const phase1 = steps(60, false)
  const phase2 = steps(60, true)
  const out: ReturnType<typeof seen>[] = []
  const first: Decision[] = []
  const go = async (list: Step[], earlier: Decision[], keep?: Decision[]) => {
    let results: (Decision | undefined)[]
    if (together) {
      results = await Promise.all(list.map((s) => issue(ls, s, earlier)))
    } else {
      results = []
      for (const s of list) results.push(await issue(ls, s, earlier))
    }
    results.forEach((d, i) => {
      const s = at(list, i)
      if (d && s.op !== 'refund') ownerOf.set(d, at(ls, s.l))
      keep?.push(d as Decision)
      out.push(seen(d))
    })
  }
  await go(phase1, [], first)
  await go(phase2, first)
  return out
}

describe.each(['node-redis', 'ioredis'] as const)('%s', (kind) => {
  let conn: { client: unknown; close: () => Promise<void> }
  beforeAll(async () => {
    conn = await connect(kind)
    // every script cached: the counts below are of EVALSHA alone
    for (const s of Object.values(generated))
      if (typeof s === 'object' && 'sha1' in s) await admin.scriptLoad(s.source)
  })
  afterAll(async () => {
    await conn?.close()
  })

  it('calls issued in one turn become one script call after the first', async () => {
    const store = new RedisStore(conn.client)
    const l = new RateLimiter({
      top: false,
      store,
      prefix: uniquePrefix('one-turn'),
      limit: 100,
      window: '1d',
      timeoutMs: LONG,
    })
    await admin.configResetStat()
    const ds = await Promise.all(Array.from({ length: 40 }, (_, i) => l.consume(`k${i % 4}`)))
    expect(await scriptCalls()).toBe(2) // the first at once, the other 39 in one batch
    expect(ds.map((d) => d.remaining).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 40 }, (_, i) => 90 + Math.floor(i / 4)),
    )
  })

  it.each(['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const)(
    '%s: calls on one key in a batch each see the writes before them and decide as if alone',
    async (algorithm) => {
      const store = new RedisStore(conn.client)
      const l = new RateLimiter({
        top: false,
        store,
        prefix: uniquePrefix('hot'),
        limit: 40,
        window: '1d',
        algorithm,
        timeoutMs: LONG,
      })
      await l.consume('hot') // the key exists: one GET per script from here on
      await admin.configResetStat()
      const ds = await Promise.all(Array.from({ length: 45 }, () => l.consume('hot')))
      const stats = await admin.info('commandstats')
      const count = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
      expect(await scriptCalls()).toBe(2) // the first call at once, the other 44 in one batch
      // each call reads the key as the calls before it left it (a read memo cost Redis more than the
      // reads), and the pattern version key is read once per script. The sliding and fixed windows'
      // straight path asks for the version in one EXISTS with the control keys, and reads by spending:
      // one INCRBY a call (the value before is its result less the cost), taken back when refused
      if (algorithm === 'fixed-window' || algorithm === 'sliding-window') {
        expect([count('get'), count('set'), count('incrby')]).toEqual([0, 0, 39 + 2 * 6])
      } else {
        expect(count('get')).toBe(47)
        expect(count('set') + count('incrby')).toBe(39) // every admitted call still writes, at once
      }
      expect(ds.filter((d) => d.allowed)).toHaveLength(39)
      expect(ds.map((d) => d.remaining).sort((a, b) => a - b)).toEqual([
        ...Array.from({ length: 6 }, () => 0),
        ...Array.from({ length: 39 }, (_, i) => i),
      ])
      expect((await l.peek('hot')).remaining).toBe(0)
    },
  )

  it.each(ALL_ALGORITHMS)(
    '%s: refunds of one turn are batched with their markers, and each spend comes back once',
    async (algorithm) => {
      const store = new RedisStore(conn.client)
      const l = new RateLimiter({
        top: false,
        store,
        prefix: uniquePrefix('refund-batch'),
        limit: 10,
        window: '1d',
        algorithm,
        denyCache: false,
        timeoutMs: LONG,
      })
      const ds: Decision[] = []
      for (let i = 0; i < 6; i++) ds.push(await l.consume('k'))
      await l.consume('k') // two other spends, which no refund of `ds` may give back
      await l.consume('k')
      await admin.configResetStat()
      // every decision refunded twice, all in one turn: the second refund of each must give nothing back
      await Promise.all([...ds, ...ds].map((d) => l.refund(d)))
      expect(await scriptCalls()).toBe(2) // the first at once, the other 11 in one batch
      expect((await l.peek('k')).remaining).toBe(8)
      // and once more, later: still nothing
      await Promise.all(ds.map((d) => l.refund(d)))
      const after = await Promise.all(Array.from({ length: 9 }, () => l.consume('k')))
      expect(after.filter((d) => d.allowed)).toHaveLength(8)
    },
  )

  it('a batch reply held back for a later check phase is never timed out by a deadline that fell due meanwhile', async () => {
    // Four scripts go out in one write (a lone call, then three batches of 2); the event loop then stalls
    // past the 50 ms deadline while Redis answers all four. After the stall the deadline's timer runs
    // before the poll phase reads the four replies in one read: the first batch reply is settled at once,
    // the other two two check phases later, after the deadline's check. Every call was answered by Redis,
    // so every call must get Redis' decision, not the failure policy's.
    // a connection of its own: a 50 ms deadline passed on a loaded machine must not touch the shared one
    const mine = await connect(kind)
    const store = new RedisStore(mine.client, { batch: { maxSize: 2 } })
    const l = new RateLimiter({
      top: false,
      store,
      prefix: uniquePrefix('held'),
      limit: 100,
      window: '1d',
      timeoutMs: 50,
      onStoreError: 'deny',
      denyCache: false,
    })
    await l.consume('k') // the script is cached, the connection warm
    const calls = Array.from({ length: 7 }, () => l.consume('k'))
    setImmediate(() => {
      const until = performance.now() + 200
      while (performance.now() < until) {
        // the stall: Redis answers meanwhile
      }
    })
    const ds = await Promise.all(calls).finally(() => mine.close())
    expect(ds.map((d) => d.source)).toEqual(Array.from({ length: 7 }, () => 'store'))
    expect(ds.map((d) => d.remaining).sort((a, b) => b - a)).toEqual([98, 97, 96, 95, 94, 93, 92])
  })

  it('the deadline queue holds the calls in flight, not every call of the last timeoutMs', async () => {
    const store = new RedisStore(conn.client)
    const l = new RateLimiter({
      top: false,
      store,
      prefix: uniquePrefix('queue'),
      limit: 1e6,
      window: '1d',
      timeoutMs: 60_000,
    })
    let most = 0
    for (let round = 0; round < 20; round++) {
      await Promise.all(Array.from({ length: 100 }, (_, i) => l.consume(`k${i}`)))
      most = Math.max(most, l.deadlines.queued)
    }
    // 2,000 calls answered well inside their 60 s deadline: none is kept until it passes
    expect(most).toBeLessThanOrEqual(100)
    expect(l.deadlines.queued).toBe(0)
  })

  it('a turn longer than maxSize is sent in batches of maxSize', async () => {
    const store = new RedisStore(conn.client, { batch: { maxSize: 8 } })
    const l = new RateLimiter({
      top: false,
      store,
      prefix: uniquePrefix('max'),
      limit: 100,
      window: '1d',
      timeoutMs: LONG,
    })
    await admin.configResetStat()
    await Promise.all(Array.from({ length: 25 }, () => l.consume('k')))
    expect(await scriptCalls()).toBe(4) // 1 + 8 + 8 + 8
  })

  it('batch: false sends every call as its own script', async () => {
    const store = new RedisStore(conn.client, { batch: false })
    const l = new RateLimiter({
      top: false,
      store,
      prefix: uniquePrefix('off'),
      limit: 100,
      window: '1d',
      timeoutMs: LONG,
    })
    await admin.configResetStat()
    await Promise.all(Array.from({ length: 10 }, () => l.consume('k')))
    expect(await scriptCalls()).toBe(10)
  })

  it('consume and peek batched (refunds among them) give exactly the decisions of the same calls one by one', async () => {
    const batched = new RedisStore(conn.client)
    const single = new RedisStore(conn.client, { batch: false })
    await admin.configResetStat()
    const a = await run(batched, uniquePrefix('eq-batched'), true)
    const batchedCalls = await scriptCalls()
    const b = await run(single, uniquePrefix('eq-single'), false)
    expect(a).toEqual(b)
    // mixed admitted and refused callers, all algorithms, one and two policies, all in two batches; the
    // limiter's refunds carry a spend id and go alone (their refund-once marker is kept by refund.lua)
    const refunds = steps(60, true).filter((s) => s.op === 'refund').length
    expect(batchedCalls).toBeLessThanOrEqual(2 * (1 + Math.ceil(59 / DEFAULT_BATCH_SIZE)) + refunds)
    const allowed = a.filter((x) => typeof x === 'object' && x.allowed).length
    const refused = a.filter((x) => typeof x === 'object' && !x.allowed).length
    expect(allowed).toBeGreaterThan(10)
    expect(refused).toBeGreaterThan(10)
  })

  it('consecutive calls of several policies go as runs of declared policies, and decide as one by one', async () => {
    // per IP and per account (and a third limiter's order of the same policies): runs of 'm' / 'q'
    const argvSizes: number[] = []
    const nr = createClient({ url: own.url }).on('error', () => {})
    await nr.connect()
    try {
      const seam = {
        evalsha: (sha: string, keys: string[], args: string[]) => {
          argvSizes.push(args.length)
          return nr.evalSha(sha, { keys, arguments: args })
        },
        eval: (source: string, keys: string[], args: string[]) => nr.eval(source, { keys, arguments: args }),
      }
      const sequence = async (store: RedisStore, prefix: string, together: boolean) => {
        const policies = {
          ip: { limit: 6, window: '1d' },
          account: { limit: 2, window: '1d', algorithm: 'gcra' },
        } as const
        const login = new RateLimiter({
          top: false,
          store,
          prefix,
          policies,
          denyCache: false,
          timeoutMs: 5000,
        })
        const other = new RateLimiter({
          top: false,
          store,
          prefix: `${prefix}-o`,
          policies,
          denyCache: false,
          timeoutMs: 5000,
        })
        const calls = (): Promise<Decision>[] => {
          const out: Promise<Decision>[] = []
          for (let i = 0; i < 24; i++) {
            const key = { ip: `ip:${i % 2}`, account: `acct:${i % 5}` }
            if (i % 8 === 7) out.push(login.peek(key))
            else out.push((i >= 16 ? other : login).consume(key, { cost: i % 9 === 4 ? 2 : 1 }))
          }
          return out
        }
        if (together) return (await Promise.all(calls())).map(seen)
        const out: ReturnType<typeof seen>[] = []
        for (const d of calls()) out.push(seen(await d))
        return out
      }
      const batched = await sequence(new RedisStore(seam), uniquePrefix('runs-b'), true)
      const sizes = argvSizes.slice()
      const single = await sequence(
        new RedisStore(conn.client, { batch: false }),
        uniquePrefix('runs-s'),
        false,
      )
      expect(batched).toEqual(single)
      expect(batched.filter((d) => typeof d === 'object' && d.allowed).length).toBeGreaterThan(4)
      expect(batched.filter((d) => typeof d === 'object' && !d.allowed).length).toBeGreaterThan(4)
      // the lone first call, then one batch of 23: each limiter's 2 policies declared once (4 x 5
      // arguments), then 11 runs of 4 + 2 arguments (a run breaks at each peek, cost change and limiter
      // change: 1-3, 4, 5-6, 7, 8-12, 13, 14, 15, 16-21, 22, 23), where one call each took 3 + 2 x 4, and
      // the batch's act-by ('@' and a server time), its control keys ('~' and their count), and each
      // limiter's pattern table version ('v' and the version)
      expect(sizes).toHaveLength(2)
      expect(sizes[1]).toBe(4 * 5 + 11 * 6 + 2 + 2 + 2 * 2)
    } finally {
      nr.destroy()
    }
  })

  it('a call that fails inside a batch goes to its own failure policy; the others are decided', async () => {
    const store = new RedisStore(conn.client)
    const prefix = uniquePrefix('fail')
    const open = new RateLimiter({ top: false, store, prefix, limit: 5, window: '1d', onStoreError: 'allow' })
    const closed = new RateLimiter({
      top: false,
      store,
      prefix,
      limit: 5,
      window: '1d',
      onStoreError: 'deny',
    })
    await open.consume('spent') // 4 left
    // Every write is refused (no replica): each consume fails on its first write, before changing state.
    await admin.configSet('min-replicas-to-write', '1')
    try {
      await admin.configResetStat()
      const ds = await Promise.all([
        open.consume('a'),
        closed.consume('b'),
        open.peek('spent'),
        open.consume('c'),
        closed.peek('spent'),
        closed.consume('d'),
      ])
      expect(await scriptCalls()).toBe(2)
      expect(ds.map((d) => [d.allowed, d.source])).toEqual([
        [true, 'fallback'],
        [false, 'fallback'],
        [true, 'store'],
        [true, 'fallback'],
        [true, 'store'],
        [false, 'fallback'],
      ])
      expect(ds[2].remaining).toBe(4)
    } finally {
      await admin.configSet('min-replicas-to-write', '0')
    }
    expect((await open.peek('a')).remaining).toBe(5) // nothing was spent
  })

  it('a batch that fails as a whole (server gone) sends each call to its own failure policy', async () => {
    const server = await startRedisServer()
    const c = await connect(kind, server.url)
    try {
      const store = new RedisStore(c.client)
      const open = new RateLimiter({
        top: false,
        store,
        prefix: 'gone',
        limit: 5,
        window: '1d',
        onStoreError: 'allow',
        timeoutMs: 2000,
      })
      const closed = new RateLimiter({
        top: false,
        store,
        prefix: 'gone',
        limit: 5,
        window: '1d',
        onStoreError: 'deny',
        timeoutMs: 2000,
      })
      await open.consume('warm')
      // The first call of the turn is written at once (the server may still answer it); the rest queue.
      const lone = open.consume('lone')
      const pending = [
        open.consume('a'),
        closed.consume('b'),
        open.peek('c'),
        closed.peek('d'),
        open.consume('e'),
      ]
      process.kill(server.pid, 'SIGKILL') // before the turn ends: nothing of the batch has been written
      const ds = await Promise.all(pending)
      expect((await lone).allowed).toBe(true)
      expect(ds.map((d) => [d.allowed, d.source])).toEqual([
        [true, 'fallback'],
        [false, 'fallback'],
        [true, 'fallback'],
        [false, 'fallback'],
        [true, 'fallback'],
      ])
    } finally {
      await c.close()
      await server.stop()
    }
  })
})

describe('batch.lua: a call of several pairs given inline (op c / p) decides as the same call in a run (m / q)', () => {
  it('same replies, admitted and refused, consume and peek', async () => {
    // two policies: sliding window 3 per day, gcra 2 per day (alg, limit, window_ms, burst)
    const a = ['2', '3', '86400000', '3']
    const b = ['5', '2', '86400000', '2']
    const inline = (op: string) => [op, '1', '2', ...a, ...b]
    const run = (op: string) => ['#', ...a, '#', ...b, op === 'c' ? 'm' : 'q', '1', '2', '1', '1', '2']
    const replies = async (form: (op: string) => string[], prefix: string) => {
      const keys = [`${prefix}:{x}:a`, `${prefix}:{x}:b`]
      const out: unknown[] = []
      for (const op of ['p', 'c', 'c', 'c', 'p', 'c']) {
        const reply = (await admin.eval(scripts.BATCH.source, { keys, arguments: form(op) })) as number[]
        // allowed, then each pair's allowed and remaining (its reset, retry and tag move with the clock)
        out.push([reply[1], reply[2], reply[3], reply[7], reply[8]])
      }
      return out
    }
    const inlined = await replies(inline, uniquePrefix('inline'))
    expect(inlined).toEqual(await replies(run, uniquePrefix('run')))
    // the gcra pair refuses the third consume: allowed 0 from then on, and nothing spent on the window pair
    expect(inlined.map((r) => (r as number[])[0])).toEqual([1, 1, 1, 0, 0, 0])
  })
})

describe('batch option', () => {
  it.each([[0], [{ maxSize: 0 }], [{ maxSize: 1.5 }], [{ maxSize: 100_000 }], ['yes'], [null]])(
    'rejects %j with a ConfigError naming it',
    (batch) => {
      expect(
        () => new RedisStore({ evalsha: async () => 0, eval: async () => 0 }, { batch: batch as never }),
      ).toThrow(/batch/)
    },
  )

  it('a client that throws fails the lone call and the batch alike, each to its policy', async () => {
    const fail = async () => {
      throw new Error('boom')
    }
    const store = new RedisStore({ evalsha: fail, eval: fail })
    const l = new RateLimiter({ top: false, store, limit: 1, window: '1m', onStoreError: 'deny' })
    const ds = await Promise.all([l.consume('a'), l.consume('b'), l.peek('c')])
    expect(ds.every((d) => d.source === 'fallback' && !d.allowed)).toBe(true)
  })
})
