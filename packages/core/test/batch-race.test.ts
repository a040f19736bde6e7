/**
 * Exactness with batching across processes: 4 children, 50 simultaneous consumes each, spread over ten
 * limiters (five algorithms x one and two policies, see fixtures/mixed-race-module.ts), so each child's
 * batch mixes algorithms, policies, admitted and refused callers, and on a cluster several slots. Every
 * limiter gets 20 attempts per round and must admit exactly 5: 50 in all, and each key left at exactly
 * what was admitted.
 */
import { join } from 'node:path'
import {
  at,
  crossedBoundary,
  type RaceHandle,
  type RedisClusterHandle,
  redisUrl,
  respCommand,
  startRace,
  startRedisCluster,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { RedisStore } from '../src'
import * as generated from '../src/scripts/generated'
import { keySlot } from '../src/stores/redis/cluster-slot'
import { nodeRedis } from './clients'
import { CLUSTER_KINDS, clusterClient } from './cluster-clients'
import { COMPACT, groups } from './fixtures/mixed-race-module'

const MODULE = join(__dirname, 'fixtures/mixed-race-module.ts')
const ROUNDS = 8
const WINDOW_MS = 60_000

async function rounds(race: RaceHandle, store: RedisStore, label: string): Promise<void> {
  const seen: string[] = []
  for (let i = 0; i < ROUNDS; i++) {
    const prefix = uniquePrefix('mixed')
    const started = Date.now()
    const r = await race.round({ prefix }, 50)
    expect(r.errorSamples).toEqual([])
    const lefts: number[][] = []
    for (const g of groups(store, prefix))
      lefts.push((await g.limiter.peek(g.key)).policies.map((p) => p.remaining))
    // The aligned-window algorithms may rightly admit more across a window boundary, and their state starts
    // over after one (a CI run peeked 5 and 8 left just past a minute): skip a round that met one, peeks
    // included.
    if (crossedBoundary(started, WINDOW_MS)) continue
    expect(r.admitted).toBe(50)
    for (const left of lefts) expect(left).toEqual(left.length === 1 ? [0] : [0, 3])
    seen.push(String(r.admitted))
  }
  console.log(`mixed batch race ${label}: admitted per round ${seen.join(',')}`)
}

describe.each([
  ['node-redis', false],
  ['ioredis', false],
  ['node-redis', true],
] as const)('%s, one server, compact storage: %s', (client, compact) => {
  let race: RaceHandle
  let close: () => Promise<unknown>
  let store: RedisStore
  beforeAll(async () => {
    race = await startRace({ workers: 4, module: MODULE, setupArgs: { url: redisUrl(), client, compact } })
    const c = await nodeRedis()
    store = new RedisStore(c, compact ? COMPACT : {})
    close = () => c.quit()
  })
  afterAll(async () => {
    await race?.close()
    await close?.()
  })
  it(
    'a batch mixing algorithms, policies, admitted and refused callers admits exactly the limits',
    () => rounds(race, store, `${client} one server${compact ? ', compact' : ''}`),
    120_000,
  )
})

describe('cluster', () => {
  let cluster: RedisClusterHandle
  beforeAll(async () => {
    cluster = await startRedisCluster({ primaries: 3 })
    const all = Object.values(generated).filter(
      (s): s is generated.Script => typeof s === 'object' && 'sha1' in s,
    )
    await Promise.all(
      cluster.nodes.flatMap((n) => all.map((s) => respCommand(n.port, ['SCRIPT', 'LOAD', s.source]))),
    )
  }, 60_000)
  afterAll(async () => {
    await cluster?.stop()
  })

  it('the ten groups live in several slots', () => {
    const slots = new Set(
      groups(new RedisStore({ evalsha: async () => 0, eval: async () => 0 }), 'p').map((g) =>
        keySlot(at(g.limiter.keysFor(g.key), 0)),
      ),
    )
    expect(slots.size).toBeGreaterThan(5)
  })

  describe.each([...CLUSTER_KINDS.map((kind) => [kind, false] as const), ['node-redis', true] as const])(
    '%s cluster, compact storage: %s',
    (client, compact) => {
      let race: RaceHandle
      let admin: Awaited<ReturnType<typeof clusterClient>>
      beforeAll(async () => {
        admin = await clusterClient(client, cluster, compact ? COMPACT : undefined)
        race = await startRace({
          workers: 4,
          module: MODULE,
          setupArgs: { nodes: cluster.nodes.map((n) => ({ host: n.host, port: n.port })), client, compact },
        })
      }, 60_000)
      afterAll(async () => {
        await race?.close()
        await admin?.close()
      })
      it(
        'a batch spanning several slots admits exactly the limits',
        () => rounds(race, admin.store as RedisStore, `${client} cluster${compact ? ', compact' : ''}`),
        120_000,
      )
    },
  )
})
