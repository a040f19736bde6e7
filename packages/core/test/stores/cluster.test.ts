/**
 * RedisStore on a real 3-primary Redis Cluster (spawned here, one per file): slot computation, client
 * detection, the store conformance suite for node-redis `createCluster` and ioredis `Redis.Cluster`, calls
 * whose keys span slots (partial spends refunded, exact accounting under concurrency), hostile identities
 * spread over the slots, and SCRIPT FLUSH on one primary recovered on that primary.
 */
import {
  at,
  clearOfBoundary,
  type RedisClusterHandle,
  respCommand,
  startRedisCluster,
  take,
} from '@tollgate/testkit'
import { ALL_ALGORITHMS, describeStore, uniquePrefix } from '@tollgate/testkit/store-suite'
import { type Algorithm, type Decision, MemoryStore, RateLimiter, RedisStore } from '../../src'
import type { ScriptClient } from '../../src/entries/scripts'
import * as generated from '../../src/scripts/generated'
import { crc16, hashTagRange, keySlot } from '../../src/stores/redis/cluster-slot'
import { ioredis, nodeRedis } from '../clients'
import {
  CLUSTER_KINDS,
  type ClusterTestClient,
  clusterClient,
  clusterFixture,
  commandCalls,
  type Owner,
  STORE_KIND,
  slotOwners,
} from '../cluster-clients'

let cluster: RedisClusterHandle
let owners: Owner[]

beforeAll(async () => {
  cluster = await startRedisCluster({ primaries: 3 })
  owners = await slotOwners(at(cluster.nodes, 0).port)
}, 60_000)

afterAll(async () => {
  await cluster?.stop()
})

const ownerOf = (key: string) => at(owners, keySlot(key)).port

describe('hash slots computed in JS', () => {
  it('crc16 is CRC-16/XMODEM (check value of "123456789" is 0x31c3)', () => {
    expect(crc16('123456789')).toBe(0x31c3)
  })

  it('hashes only the first non-empty {tag}, as the cluster spec says', () => {
    expect(hashTagRange('{user1000}.following')).toEqual([1, 9])
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'))
    expect(hashTagRange('foo{}{bar}')).toEqual([0, 10])
    expect(hashTagRange('foo{{bar}}zap')).toEqual([4, 8]) // '{bar'
    expect(hashTagRange('foo{bar}{zap}')).toEqual([4, 7])
  })

  it('agrees with CLUSTER KEYSLOT on tags, empty tags, nested braces, UTF-8, control bytes and long keys', async () => {
    const keys = [
      'a',
      '',
      '{',
      '}',
      '{}',
      '}{',
      '{a}',
      'foo{}{bar}',
      'foo{{bar}}zap',
      'foo{bar}{zap}',
      'tollgate:{user:42}:sw-1m',
      'p:{ü€😀}:x',
      'p:{\u0000\r\n}:x',
      'x'.repeat(1000),
      `{${'é'.repeat(200)}}`,
    ]
    for (let i = 0; i < 200; i++) keys.push(`k:${i}:{${(i * 7919).toString(36)}}:${i % 3}`)
    const port = at(cluster.nodes, 0).port
    const server = await Promise.all(keys.map((k) => respCommand(port, ['CLUSTER', 'KEYSLOT', k])))
    expect(keys.map(keySlot)).toEqual(server)
  })
})

describe('client detection', () => {
  it.each(CLUSTER_KINDS)('%s cluster client: cluster mode on', async (kind) => {
    const c = await clusterClient(kind, cluster)
    expect(c.store).toMatchObject({ kind: STORE_KIND[kind], cluster: true })
    await c.close()
  })

  it('single-node clients and a plain ScriptClient: cluster mode off', async () => {
    const nr = await nodeRedis()
    const io = ioredis()
    expect(new RedisStore(nr)).toMatchObject({ kind: 'node-redis', cluster: false })
    expect(new RedisStore(io)).toMatchObject({ kind: 'ioredis', cluster: false })
    const seam: ScriptClient = { evalsha: async () => null, eval: async () => null }
    expect(new RedisStore(seam)).toMatchObject({ kind: 'custom', cluster: false })
    expect(new RedisStore({ ...seam, cluster: true })).toMatchObject({ kind: 'custom', cluster: true })
    await nr.quit()
    io.disconnect()
  })

  it('on a single node a call whose keys hash to different slots stays one script', async () => {
    const nr = await nodeRedis()
    let calls = 0
    const counted: ScriptClient = {
      evalsha: (sha, keys, args) => {
        calls++
        return nr.evalSha(sha, { keys, arguments: args })
      },
      eval: (source, keys, args) => nr.eval(source, { keys, arguments: args }),
    }
    const login = twoPolicies(new RedisStore(counted), 'fixed-window', 5, 5)
    const key = { ip: 'ip:1', account: 'email:1' }
    const [a, b] = take(login.keysFor(key), 2)
    expect(keySlot(a)).not.toBe(keySlot(b))
    calls = 0
    expect((await login.consume(key)).allowed).toBe(true)
    expect(calls).toBe(1)
    await nr.quit()
  })
})

for (const kind of CLUSTER_KINDS) {
  describeStore(`RedisStore (${kind} cluster)`, () => clusterFixture(kind, cluster))
}

function twoPolicies(
  store: RedisStore,
  algorithm: Algorithm,
  ipLimit: number,
  accountLimit: number,
  prefix = uniquePrefix('xslot'),
) {
  return new RateLimiter({
    store,
    prefix,
    denyCache: false,
    // hundreds of calls at once on a 3-node cluster sharing a loaded machine: a deadline the store meets
    timeoutMs: 10_000,
    policies: {
      ip: { limit: ipLimit, window: '1m', algorithm },
      account: { limit: accountLimit, window: '1m', algorithm },
    },
  })
}

/** An (ip, account) key whose two Redis keys live on different primaries. */
function crossNodeKey(limiter: RateLimiter, seed: string): { ip: string; account: string } {
  for (let n = 0; ; n++) {
    const key = { ip: `ip:198.51.100.${n}:${seed}`, account: `email:u${n}.${seed}@example.com` }
    const [a, b] = take(limiter.keysFor(key), 2)
    if (ownerOf(a) !== ownerOf(b)) return key
  }
}

const remaining = (d: Decision) => d.policies.map((p) => p.remaining)

describe.each(CLUSTER_KINDS)('%s cluster: one call, keys in several slots', (kind) => {
  let c: ClusterTestClient
  let extra: ClusterTestClient | undefined
  afterEach(async () => {
    await extra?.close()
    extra = undefined
  })
  beforeAll(async () => {
    c = await clusterClient(kind, cluster)
  })
  // minute-long windows below: no test may straddle a minute boundary (a fixed window starts anew there)
  beforeEach(() => clearOfBoundary())
  afterAll(async () => {
    await c?.close()
  })

  describe.each(ALL_ALGORITHMS)('%s', (algorithm) => {
    it('per-ip allowed, per-account refused: the ip spend is given back (peek shows it)', async () => {
      const login = twoPolicies(c.store, algorithm, 5, 2)
      const key = crossNodeKey(login, 'refund')
      expect(remaining(await login.consume(key))).toEqual([4, 1])
      expect(remaining(await login.consume(key))).toEqual([3, 0])
      const refused = await login.consume(key)
      expect(refused).toMatchObject({ allowed: false, source: 'store', limit: 2, remaining: 0 })
      expect(refused.retryAfterMs).toBeGreaterThan(0)
      // the ip pair is reported as it was before the refused call's (returned) spend
      expect(refused.policies[0]).toMatchObject({
        policy: 'ip',
        allowed: true,
        remaining: 3,
        retryAfterMs: 0,
      })
      expect(refused.policies[1]).toMatchObject({ policy: 'account', allowed: false, remaining: 0 })
      expect(remaining(await login.peek(key))).toEqual([3, 0])
      // the ip quota is really there: another account spends it
      const other = await login.consume({ ip: key.ip, account: `${key.account}.other` })
      expect(other.policies[0]).toMatchObject({ allowed: true, remaining: 2 })
    })

    it('per-ip refused, per-account allowed: the account spend is given back', async () => {
      const login = twoPolicies(c.store, algorithm, 2, 5)
      const key = crossNodeKey(login, 'refund2')
      await login.consume(key, { cost: 2 })
      const refused = await login.consume(key, { cost: 2 })
      expect(refused.allowed).toBe(false)
      expect(refused.policies[1]).toMatchObject({ policy: 'account', allowed: true, remaining: 3 })
      expect(remaining(await login.peek(key))).toEqual([0, 3])
    })

    it('refund and reset of an admitted call reach every slot; peek spends nothing', async () => {
      const login = twoPolicies(c.store, algorithm, 5, 5)
      const key = crossNodeKey(login, 'refund3')
      const a = await login.consume(key, { cost: 3 })
      expect(remaining(a)).toEqual([2, 2])
      expect(remaining(await login.peek(key))).toEqual([2, 2])
      await login.refund(a, { cost: 2 })
      expect(remaining(await login.peek(key))).toEqual([4, 4])
      await login.reset(key)
      expect(remaining(await login.peek(key))).toEqual([5, 5])
      for (const k of login.keysFor(key)) expect(await c.exists(k)).toBe(false)
    })
  })

  it('a cost per policy across slots: a refusal gives each spend back by its own cost; settle by record', async () => {
    const ai = twoPolicies(c.store, 'fixed-window', 10, 100)
    const key = crossNodeKey(ai, 'costs')
    const a = await ai.consume(key, { cost: { account: 60 } })
    expect(remaining(a)).toEqual([9, 40])
    const refused = await ai.consume(key, { cost: { ip: 3, account: 50 } })
    expect(refused.allowed).toBe(false)
    expect(remaining(await ai.peek(key, { cost: 0 }))).toEqual([9, 40]) // the ip pair's 3 came back
    await ai.settle(a, { account: 90 })
    expect(remaining(await ai.peek(key, { cost: 0 }))).toEqual([9, 10])
    await ai.refund(a)
    expect(remaining(await ai.peek(key, { cost: 0 }))).toEqual([9, 10]) // settled: no more
  })

  it('three policies on three primaries: refused by one, nothing kept on the other two', async () => {
    const limiter = new RateLimiter({
      store: c.store,
      prefix: uniquePrefix('three'),
      denyCache: false,
      policies: {
        ip: { limit: 10, window: '1m' },
        account: { limit: 1, window: '1m', algorithm: 'fixed-window' },
        tenant: { limit: 10, window: '1m', algorithm: 'gcra' },
      },
    })
    let key = { ip: '', account: '', tenant: '' }
    for (let n = 0; ; n++) {
      key = { ip: `ip:${n}`, account: `acct:${n}`, tenant: `tenant:${n}` }
      if (new Set(limiter.keysFor(key).map(ownerOf)).size === 3) break
    }
    expect(remaining(await limiter.consume(key))).toEqual([9, 0, 9])
    const refused = await limiter.consume(key)
    expect(refused.allowed).toBe(false)
    expect(remaining(refused)).toEqual([9, 0, 9])
    expect(remaining(await limiter.peek(key))).toEqual([9, 0, 9])
  })

  it('under concurrency: never over the limit, and no spend is left behind', async () => {
    // 1 ip shared by 12 accounts, 25 calls per account at once: refusals on either side happen together.
    // GLIDE withdraws a request after its own requestTimeout (250 ms by default), which 300 calls at
    // once on a loaded machine can pass: this test measures the store, so that client gets 9 s too.
    if (kind === 'valkey-glide') extra = await clusterClient(kind, cluster, undefined, 9_000)
    const own = extra ?? c
    const login = twoPolicies(own.store, 'sliding-log', 20, 3)
    const seed = uniquePrefix('conc')
    const base = crossNodeKey(login, seed)
    const keys = Array.from({ length: 12 }, (_, i) => ({ ip: base.ip, account: `${base.account}.${i}` }))
    const calls = keys.flatMap((key) => Array.from({ length: 25 }, () => login.consume(key)))
    const decisions = await Promise.all(calls)
    expect(decisions.every((d) => d.source === 'store')).toBe(true)
    const admitted = decisions.filter((d) => d.allowed).length
    const perAccount = keys.map(
      (_, i) => decisions.slice(i * 25, i * 25 + 25).filter((d) => d.allowed).length,
    )
    expect(admitted).toBeLessThanOrEqual(20)
    for (const n of perAccount) expect(n).toBeLessThanOrEqual(3)
    // exact accounting once every call has answered: each key holds exactly what was admitted
    expect(at((await login.peek(at(keys, 0))).policies, 0).remaining).toBe(20 - admitted)
    for (let i = 0; i < keys.length; i++) {
      expect(at((await login.peek(at(keys, i))).policies, 1).remaining).toBe(3 - at(perAccount, i))
    }
    // and what is left can still be spent, to exactly the limit
    let more = 0
    for (let i = 0; i < keys.length; i++) {
      for (let j = at(perAccount, i); j < 3; j++) if ((await login.consume(at(keys, i))).allowed) more++
    }
    expect(admitted + more).toBe(20)
    console.log(
      `${kind} cross-slot concurrency: ${admitted} of 300 admitted at once (ip limit 20), ${more} after`,
    )
  })
})

describe('one call across slots, when a slot fails (node-redis cluster behind a fault-injecting ScriptClient)', () => {
  let c: ClusterTestClient
  beforeAll(async () => {
    c = await clusterClient('node-redis', cluster)
  })
  afterAll(async () => {
    await c?.close()
  })
  beforeEach(() => clearOfBoundary()) // minute-long fixed windows below

  const refundShas = new Set(
    Object.values(generated)
      .filter((s): s is generated.Script => typeof s === 'object' && s !== null && 'sha1' in s)
      .filter((s) => s.name.startsWith('refund'))
      .map((s) => s.sha1),
  )
  /** The cluster client, failing the EVALSHAs `fail` picks, with the error a server would send. */
  const faulty = (fail: (sha: string, keys: string[]) => boolean): RedisStore => {
    const raw = c.raw as {
      evalSha(sha: string, o: { keys: string[]; arguments: string[] }): Promise<unknown>
      eval(src: string, o: { keys: string[]; arguments: string[] }): Promise<unknown>
    }
    const seam: ScriptClient = {
      cluster: true,
      evalsha: (sha, keys, args) =>
        fail(sha, keys)
          ? Promise.reject(new Error('ERR injected'))
          : raw.evalSha(sha, { keys, arguments: args }),
      eval: (source, keys, args) => raw.eval(source, { keys, arguments: args }),
    }
    return new RedisStore(seam)
  }

  it('a slot that fails makes the whole call take the failure policy, and the other spends are given back', async () => {
    const prefix = uniquePrefix('slotfail')
    const healthy = twoPolicies(c.store, 'sliding-window', 5, 5, prefix)
    const key = crossNodeKey(healthy, 'slotfail')
    const accountKey = healthy.keysFor(key)[1]
    const broken = new RateLimiter({
      store: faulty((_sha, keys) => keys[0] === accountKey),
      prefix,
      denyCache: false,
      onStoreError: 'deny',
      policies: { ip: { limit: 5, window: '1m' }, account: { limit: 5, window: '1m' } },
    })
    const d = await broken.consume(key)
    expect(d).toMatchObject({ allowed: false, source: 'fallback' })
    expect(remaining(await healthy.peek(key))).toEqual([5, 5])
  })

  it('a refund that fails leaves the call refused (not an error) and reports the spend it left', async () => {
    const prefix = uniquePrefix('refundfail')
    const healthy = twoPolicies(c.store, 'fixed-window', 5, 1, prefix)
    const key = crossNodeKey(healthy, 'refundfail')
    expect((await healthy.consume(key)).allowed).toBe(true)
    const broken = new RateLimiter({
      store: faulty((sha) => refundShas.has(sha)),
      prefix,
      denyCache: false,
      onStoreError: 'allow',
      policies: {
        ip: { limit: 5, window: '1m', algorithm: 'fixed-window' },
        account: { limit: 1, window: '1m', algorithm: 'fixed-window' },
      },
    })
    const d = await broken.consume(key)
    expect(d).toMatchObject({ allowed: false, source: 'store' })
    expect(d.policies[0]).toMatchObject({ policy: 'ip', allowed: true, remaining: 3 }) // the spend stayed
    expect(remaining(await healthy.peek(key))).toEqual([3, 0])
  })
})

describe('hostile identities', () => {
  // Were the identity's text the hash tag, each of these families would pin every member to one slot.
  const pinning: ((i: number) => string)[] = [
    (i) => `x}:${i}:{evil`, // raw key p:{x}:…:{evil}:… -> tag 'x'
    (i) => `{evil}${i}`, // p:{{evil}…  -> tag '{evil'
    (i) => `evil}${i}`, // p:{evil}…  -> tag 'evil'
    (i) => `evil}\r\n${i}{`, // with control bytes
    (i) => `evil}{${i}}`, // two tags: the first wins
    (i) => `evil}\x7f${i}`, // with DEL
  ]
  // Other hostile shapes: empty first tag, control bytes, long (in chars or only in UTF-8 bytes), the
  // hashed marker, a tag of the attacker's choosing.
  const others: ((i: number) => string)[] = [
    (i) => `}{evil}{${i}`,
    (i) => `\u0000${i}`,
    (i) => `${'a'.repeat(200)}${i}`,
    (i) => `${'é'.repeat(70)}${i}`,
    (i) => `~h:${i}`,
    (i) => `{${i}}`,
  ]
  const families = [...pinning, ...others]
  const identities = Array.from({ length: 1000 }, (_, i) => at(families, i % families.length)(i))
  const prefix = 'hostile'

  it('would pile onto one slot per family if their text were the tag', () => {
    const pinned = identities.filter((_, i) => i % families.length < pinning.length)
    expect(pinned.length).toBeGreaterThan(490)
    const raw = new Set(pinned.map((id) => keySlot(`${prefix}:{${id}}:sw-1m`)))
    expect(raw.size).toBe(3) // 'x', '{evil', 'evil'
  })

  it('1,000 of them spread over the slots and all three primaries, and each is served', async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), prefix, limit: 5, window: '1m' })
    const keys = identities.map((id) => at(limiter.keysFor(id), 0))
    const perSlot = new Map<number, number>()
    for (const k of keys) perSlot.set(keySlot(k), (perSlot.get(keySlot(k)) ?? 0) + 1)
    const perNode = new Map<number, number>()
    for (const k of keys) perNode.set(ownerOf(k), (perNode.get(ownerOf(k)) ?? 0) + 1)
    console.log(
      `hostile identities: ${perSlot.size} slots, at most ${Math.max(...perSlot.values())} per slot, per node ${[...perNode.values()].join('/')}`,
    )
    expect(Math.max(...perSlot.values())).toBeLessThanOrEqual(4)
    expect(perSlot.size).toBeGreaterThan(950)
    expect(perNode.size).toBe(3)
    for (const n of perNode.values()) expect(n).toBeGreaterThan(250)
    // the server agrees on every slot, and every key has exactly one tag
    const port = at(cluster.nodes, 0).port
    const server = await Promise.all(keys.map((k) => respCommand(port, ['CLUSTER', 'KEYSLOT', k])))
    expect(server).toEqual(keys.map(keySlot))
    // served on the cluster: no CROSSSLOT, no error, one spend each
    const c = await clusterClient('node-redis', cluster)
    const onCluster = new RateLimiter({ store: c.store, prefix, limit: 5, window: '1m', timeoutMs: 10_000 })
    const decisions = await Promise.all(identities.map((id) => onCluster.consume(id)))
    expect(decisions.filter((d) => d.source !== 'store' || d.remaining !== 4)).toEqual([])
    await c.close()
  })
})

describe.each(CLUSTER_KINDS)('%s cluster: SCRIPT FLUSH on one primary', (kind) => {
  it('is invisible, and the EVAL that re-caches runs on that primary only', async () => {
    const c = await clusterClient(kind, cluster)
    const limiter = new RateLimiter({
      store: c.store,
      prefix: uniquePrefix('flush'),
      limit: 1000,
      window: '1m',
      // every call must reach the cluster: a loaded machine must not send one to the failure policy
      timeoutMs: 10_000,
    })
    const ids = Array.from({ length: 300 }, (_, i) => `user:${i}`)
    await Promise.all(ids.map((id) => limiter.peek(id))) // every primary has seen both scripts
    await Promise.all(ids.map((id) => limiter.consume(id)))
    const primaries = cluster.nodes.map((n) => n.port)
    await Promise.all(primaries.map((p) => respCommand(p, ['CONFIG', 'RESETSTAT'])))
    const flushed = at(primaries, 1)
    const decisions: Decision[] = []
    for (let round = 0; round < 6; round++) {
      if (round === 3) await respCommand(flushed, ['SCRIPT', 'FLUSH'])
      decisions.push(...(await Promise.all(ids.map((id) => limiter.consume(id)))))
    }
    expect(decisions.filter((d) => d.source !== 'store' || !d.allowed)).toEqual([])
    expect(decisions.slice(-ids.length).every((d) => d.remaining === 1000 - 7)).toBe(true)
    const calls = await Promise.all(primaries.map(commandCalls))
    const evals = calls.map((s) => s.eval ?? 0)
    console.log(`${kind}: EVAL per primary after SCRIPT FLUSH on the second: ${evals.join('/')}`)
    expect(evals[1]).toBeGreaterThanOrEqual(1)
    expect(evals[0]).toBe(0)
    expect(evals[2]).toBe(0)
    // EVALSHA resumes on the flushed primary once one EVAL has re-cached the script
    expect(at(calls, 1).evalsha).toBeGreaterThan(at(evals, 1))
    await c.close()
  })
})
