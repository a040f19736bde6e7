/**
 * Exactness across OS processes on a real 3-primary cluster: 4 children, each on its own warmed cluster
 * client, released together, 50 simultaneous consumes each against limit 5, 20 rounds per algorithm,
 * for node-redis `createCluster` and ioredis `Redis.Cluster`:
 * - one policy (one key, one slot): exactly 5 admitted every round;
 * - two policies whose keys live on different primaries, ip binding (account limit 1000): exactly 5;
 * - the same with both tight (ip 5, account 8): never more than 5, and once the round has answered,
 *   each key holds exactly what was admitted (every refused call's partial spend was given back).
 */
import { join } from 'node:path'
import {
  at,
  crossedBoundary,
  type RaceHandle,
  type RedisClusterHandle,
  respCommand,
  startRace,
  startRedisCluster,
  take,
} from '@tollgate/testkit'
import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import { type Algorithm, type KeyInput, MemoryStore, RateLimiter } from '../src'
import * as generated from '../src/scripts/generated'
import { keySlot } from '../src/stores/redis/cluster-slot'
import { CLUSTER_KINDS, type ClusterTestClient, clusterClient, slotOwners } from './cluster-clients'
import { RACE_TIMEOUT_MS, type RaceMode } from './fixtures/cluster-race-module'

const MODULE = join(__dirname, 'fixtures/cluster-race-module.ts')
const ROUNDS = 20
const TIGHT_ROUNDS = 10
const WINDOW_MS = 60_000

let cluster: RedisClusterHandle
let crossKey: { ip: string; account: string }

beforeAll(async () => {
  cluster = await startRedisCluster({ primaries: 3 })
  // Every script cached on every primary: the race measures the warmed path (NOSCRIPT is tested apart).
  const all = Object.values(generated).filter(
    (s): s is generated.Script => typeof s === 'object' && 'sha1' in s,
  )
  await Promise.all(
    cluster.nodes.flatMap((n) => all.map((s) => respCommand(n.port, ['SCRIPT', 'LOAD', s.source]))),
  )
  // An (ip, account) pair whose keys live on two different primaries (prefixes never touch the slot).
  const owners = await slotOwners(at(cluster.nodes, 0).port)
  const keysOf = new RateLimiter({
    store: new MemoryStore(),
    prefix: 'any',
    policies: { ip: { limit: 1, window: 1000 }, account: { limit: 1, window: 1000 } },
  })
  for (let n = 0; ; n++) {
    crossKey = { ip: `ip:203.0.113.${n}`, account: `email:victim${n}@example.com` }
    const [a, b] = take(keysOf.keysFor(crossKey), 2)
    if (at(owners, keySlot(a)).port !== at(owners, keySlot(b)).port) break
  }
}, 60_000)

afterAll(async () => {
  await cluster?.stop()
})

describe.each(CLUSTER_KINDS)('%s cluster: no over-admission across processes', (client) => {
  let race: RaceHandle
  let admin: ClusterTestClient
  beforeAll(async () => {
    admin = await clusterClient(client, cluster)
    race = await startRace({
      workers: 4,
      module: MODULE,
      setupArgs: { nodes: cluster.nodes.map((n) => ({ host: n.host, port: n.port })), client },
    })
  }, 60_000)
  afterAll(async () => {
    await race?.close()
    await admin?.close()
  })

  /** Whether an aligned-window algorithm saw a window boundary (of the shared clock) since `started`. */
  const straddles = (algorithm: Algorithm, started: number) =>
    (algorithm === 'fixed-window' || algorithm === 'sliding-window') && crossedBoundary(started, WINDOW_MS)

  const round = async (algorithm: Algorithm, mode: RaceMode, prefix: string) => {
    const key: KeyInput = mode === 'one' ? 'hot-key' : crossKey
    const started = Date.now()
    const r = await race.round({ prefix, algorithm, mode, key }, 50)
    expect(r.errorSamples).toEqual([])
    expect(r.errors).toBe(0)
    return { admitted: r.admitted, started, straddled: straddles(algorithm, started) }
  }

  // The fixed window's bound is per aligned window, and the sliding-window counter's estimate is exact
  // only inside one: a round that straddles a boundary may rightly admit more (at most the limit on each
  // side). Such a round is checked against that bound and reported.
  const exactly = async (algorithm: Algorithm, mode: RaceMode, label: string) => {
    const admitted: string[] = []
    for (let i = 0; i < ROUNDS; i++) {
      const r = await round(algorithm, mode, uniquePrefix(`${mode}-${algorithm}`))
      expect(r.admitted).toBe(r.straddled ? Math.min(r.admitted, 10) : 5)
      admitted.push(r.straddled ? `${r.admitted} (across a window boundary)` : String(r.admitted))
    }
    console.log(`cluster race ${client} ${label} ${algorithm}: ${admitted.join(',')}`)
  }

  it.each(ALL_ALGORITHMS)('one policy, %s: exactly the limit in every round', (algorithm) =>
    exactly(algorithm, 'one', 'one policy'),
  )

  it.each(ALL_ALGORITHMS)('two policies on two primaries, %s: exactly the binding limit', (algorithm) =>
    exactly(algorithm, 'cross', 'cross-slot'),
  )

  it.each(ALL_ALGORITHMS)(
    'two tight policies on two primaries, %s: never over, nothing held after',
    async (algorithm) => {
      const admitted: number[] = []
      for (let i = 0; i < TIGHT_ROUNDS; i++) {
        const prefix = uniquePrefix(`tight-${algorithm}`)
        const r = await round(algorithm, 'tight', prefix)
        const peek = await new RateLimiter({
          store: admin.store,
          prefix,
          policies: {
            ip: { limit: 5, window: '1m', algorithm },
            account: { limit: 8, window: '1m', algorithm },
          },
          timeoutMs: RACE_TIMEOUT_MS,
        }).peek(crossKey)
        if (straddles(algorithm, r.started)) continue
        admitted.push(r.admitted)
        expect(r.admitted).toBeLessThanOrEqual(5)
        expect(peek.policies.map((p) => p.remaining)).toEqual([5 - r.admitted, 8 - r.admitted])
      }
      console.log(`cluster race ${client} cross-slot both tight ${algorithm}: ${admitted.join(',')}`)
    },
  )
})
