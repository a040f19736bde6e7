/**
 * Blocks, allow entries and overrides on a real 3-primary Redis Cluster: each identity's control key lives in its
 * own slot, so a call and its identity's entry are one script; calls over identities of several slots
 * (one script per slot), batches per slot, and the block index are each decided where their keys live.
 */
import { type RedisClusterHandle, startRedisCluster } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { RateLimiter, RedisStore } from '../../src'
import { keySlot } from '../../src/stores/redis/cluster-slot'
import { type ClusterTestClient, clusterClient } from '../cluster-clients'

// the tests check decisions, not deadlines: a first call on a loaded machine (its scripts loaded on each
// primary) must not turn into the failure policy's answer by the default 500 ms
const DEADLINE_MS = 10_000

let cluster: RedisClusterHandle
let one: ClusterTestClient
let two: ClusterTestClient
beforeAll(async () => {
  cluster = await startRedisCluster({ primaries: 3 })
  one = await clusterClient('node-redis', cluster)
  two = await clusterClient('ioredis', cluster)
}, 60_000)
afterAll(async () => {
  await one?.close()
  await two?.close()
  await cluster?.stop()
})

it('blocks and allow entries on a cluster, seen by another process on its next call', async () => {
  const prefix = uniquePrefix('blkc')
  const policies = { ip: { limit: 5, window: '1h' as const }, account: { limit: 2, window: '1h' as const } }
  const a = new RateLimiter({ store: one.store, prefix, policies, timeoutMs: DEADLINE_MS })
  const b = new RateLimiter({ store: two.store, prefix, policies, denyCache: false, timeoutMs: DEADLINE_MS })
  // identities in different slots: the call runs one script per slot
  const ids = Array.from({ length: 40 }, (_, i) => `id:${i}`)
  const ip = ids[0]!
  const account = ids.find((id) => keySlot(`{${id}}`) !== keySlot(`{${ip}}`))!
  await a.block(ip, { for: '1h', reason: 'abuse' })
  const d = await b.consume({ ip: account, account: ip }) // the blocked identity second
  expect(d).toMatchObject({ allowed: false, source: 'block' })
  expect(d.retryAfterMs).toBeGreaterThan(3_500_000)
  expect((await b.peek({ ip: account, account })).remaining).toBe(2) // nothing spent elsewhere
  expect((await b.consume(ip)).source).toBe('block')
  expect(await b.blocks()).toEqual([{ identity: ip, reason: 'abuse', expiresInMs: expect.any(Number) }])
  await a.unblock(ip)
  expect((await b.consume(ip)).source).toBe('store')
  // a batch of one turn over many slots: each identity's entry applies to its own calls only
  await a.block('id:7', { for: '1h' })
  await a.allow('id:8', { for: '1h' })
  const ds = await Promise.all(ids.slice(1, 12).map((id) => b.consume(id)))
  expect(ds.map((x) => x.source)).toEqual(
    ids.slice(1, 12).map((id) => (id === 'id:7' ? 'block' : id === 'id:8' ? 'allow' : 'store')),
  )
}, 30_000)

it('overrides on a cluster: set through one client, applied by another on its next call, per slot', async () => {
  const prefix = uniquePrefix('ovrc')
  const policies = { rate: { limit: 5, window: '1h' as const }, monthly: { limit: 2, window: '1h' as const } }
  const a = new RateLimiter({ store: one.store, prefix, policies, timeoutMs: DEADLINE_MS })
  const b = new RateLimiter({ store: two.store, prefix, policies, denyCache: false, timeoutMs: DEADLINE_MS })
  const ids = Array.from({ length: 40 }, (_, i) => `tenant:${i}`)
  const raised = ids[3]!
  const other = ids.find((id) => keySlot(`{${id}}`) !== keySlot(`{${raised}}`))!
  await a.overrides.set(raised, { monthly: { limit: 4 } }, { ttl: '1d' })
  // a call over two slots: each identity's override applies to its own pairs
  const d = await b.consume({ rate: other, monthly: raised })
  expect(d.policies.map((p) => p.limit)).toEqual([5, 4])
  // a batch of one turn over many slots
  const ds = await Promise.all(ids.slice(0, 12).map((id) => b.consume({ rate: id, monthly: id })))
  expect(ds.map((x) => x.policies[1]!.limit)).toEqual(ids.slice(0, 12).map((id) => (id === raised ? 4 : 2)))
  expect(await b.overrides.list()).toEqual([
    { identity: raised, limits: { monthly: { limit: 4 } }, expiresInMs: expect.any(Number) },
  ])
  await a.overrides.delete(raised)
  expect((await b.consume(raised)).policies[1]!.limit).toBe(2)
}, 30_000)

it('a pattern override on a cluster: set through one client, applied in every slot by another on its next call', async () => {
  const prefix = uniquePrefix('patc')
  const policies = { rate: { limit: 5, window: '1h' as const }, monthly: { limit: 2, window: '1h' as const } }
  const a = new RateLimiter({ store: one.store, prefix, policies, timeoutMs: DEADLINE_MS })
  const b = new RateLimiter({ store: two.store, prefix, policies, denyCache: false, timeoutMs: DEADLINE_MS })
  const ids = Array.from({ length: 30 }, (_, i) => `tenant:acme:${i}`)
  // b has read the (empty) pattern table before the change
  expect((await b.consume('tenant:other:0')).policies[1]).toMatchObject({ limit: 2 })
  await a.overrides.set('tenant:acme:*', { monthly: { limit: 50 } })
  expect(new Set(ids.map((id) => keySlot(`{${id}}`))).size).toBeGreaterThan(20)
  // one turn over many slots (batches per slot), then one call over two slots
  const ds = await Promise.all(ids.map((id) => b.consume(id)))
  expect(ds.map((d) => d.policies[1]!.limit)).toEqual(ids.map(() => 50))
  const across = await b.consume({ rate: 'tenant:other:1', monthly: ids[1]! })
  expect(across.policies.map((p) => p.limit)).toEqual([5, 50])
  expect((await b.consume('tenant:other:2')).policies[1]).toMatchObject({ limit: 2 })
  await a.overrides.delete('tenant:acme:*')
  // ids[1] spent two of the pattern's 50 (alone and across): now over the policy's own 2
  expect((await b.consume(ids[1]!)).policies[1]).toMatchObject({ limit: 2, allowed: false })
}, 60_000)

it("storage: 'compact' on a cluster: blocks, allow entries and overrides reach pairs in their buckets' slots", async () => {
  const prefix = uniquePrefix('cmpc')
  const policies = { rate: { limit: 5, window: '1h' as const }, day: { limit: 3, window: '1d' as const } }
  // pairs live in buckets, in other slots than their identities' control keys
  const a = new RateLimiter({
    store: new RedisStore(one.raw, { storage: 'compact' }),
    prefix,
    policies,
    timeoutMs: DEADLINE_MS,
  })
  const b = new RateLimiter({
    store: new RedisStore(two.raw, { storage: 'compact' }),
    prefix,
    policies,
    denyCache: false,
    timeoutMs: DEADLINE_MS,
  })
  const ids = Array.from({ length: 12 }, (_, i) => `cmp:${i}`)
  expect((await b.consume(ids[0]!)).allowed).toBe(true)
  await a.block(ids[0]!, { for: '1h', reason: 'abuse' })
  await a.allow(ids[1]!, { for: '1h' })
  await a.overrides.set(ids[2]!, { day: { limit: 7 } }, { ttl: '1d' })
  // a lone call, then one turn over many slots (batches per slot)
  expect(await b.consume(ids[0]!)).toMatchObject({ allowed: false, source: 'block' })
  const ds = await Promise.all(ids.map((id) => b.consume(id)))
  expect(ds.map((d) => d.source)).toEqual(
    ids.map((_, i) => (i === 0 ? 'block' : i === 1 ? 'allow' : 'store')),
  )
  expect(ds.map((d) => d.policies[1]!.limit)).toEqual(ids.map((_, i) => (i === 2 ? 7 : 3)))
  await a.unblock(ids[0]!)
  await a.overrides.delete(ids[2]!)
  // its second spend: the refusals spent nothing (day: 3 - 2)
  expect(await b.consume(ids[0]!)).toMatchObject({ allowed: true, source: 'store', remaining: 1 })
  expect((await b.consume(ids[2]!)).policies[1]!.limit).toBe(3)
}, 30_000)
