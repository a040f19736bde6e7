/**
 * Cluster clients and admin helpers for the cluster suites: a node-redis `createCluster`, an ioredis
 * `Redis.Cluster`, an iovalkey `Cluster` or a Valkey GLIDE `GlideClusterClient` on a testkit cluster, a store fixture for the conformance suite, and the slot map read
 * from the nodes themselves (CLUSTER SLOTS), never from a client's cache.
 */
import { type RedisClusterHandle, respCommand } from '@tollgate/testkit'
import type { StoreFixture } from '@tollgate/testkit/store-suite'
import { GlideClusterClient, Logger } from '@valkey/valkey-glide'
import Redis from 'ioredis'
import Valkey from 'iovalkey'
import { createCluster } from 'redis'
import { RedisStore, type RedisStoreOptions } from '../src'

export type ClusterKind = 'node-redis' | 'ioredis' | 'iovalkey' | 'valkey-glide'
export const CLUSTER_KINDS: readonly ClusterKind[] = ['node-redis', 'ioredis', 'iovalkey', 'valkey-glide']

/** The store's `kind` for a cluster client (iovalkey is driven as ioredis). */
export const STORE_KIND = {
  'node-redis': 'node-redis',
  ioredis: 'ioredis',
  iovalkey: 'ioredis',
  'valkey-glide': 'valkey-glide',
} as const

/** The few commands the tests run through either client, routed by key like any command. */
export interface ClusterTestClient {
  readonly kind: ClusterKind
  readonly raw: unknown
  readonly store: RedisStore
  pttl(key: string): Promise<number>
  exists(key: string): Promise<boolean>
  zcard(key: string): Promise<number>
  close(): Promise<void>
}

export async function clusterClient(
  kind: ClusterKind,
  cluster: RedisClusterHandle,
  options?: RedisStoreOptions,
  /** GLIDE's own per-request timeout (its default is 250 ms); other clients have none to set. */
  glideRequestTimeout?: number,
): Promise<ClusterTestClient> {
  if (kind === 'valkey-glide') {
    Logger.setLoggerConfig('off') // its core logs every error reply at 'warn'
    const client = await GlideClusterClient.createClient({
      addresses: cluster.nodes.map((n) => ({ host: n.host, port: n.port })),
      ...(glideRequestTimeout === undefined ? {} : { requestTimeout: glideRequestTimeout }),
    })
    return {
      kind,
      raw: client,
      store: new RedisStore(client, options),
      pttl: (key) => client.pttl(key),
      exists: async (key) => (await client.exists([key])) === 1,
      zcard: (key) => client.zcard(key),
      close: async () => {
        client.close()
      },
    }
  }
  if (kind === 'ioredis' || kind === 'iovalkey') {
    const Cluster = kind === 'ioredis' ? Redis.Cluster : Valkey.Cluster
    const client = new Cluster(
      cluster.nodes.map((n) => ({ host: n.host, port: n.port })),
      { redisOptions: { maxRetriesPerRequest: 2 } },
    )
    client.on('error', () => {})
    await new Promise<void>((resolve, reject) => {
      client.once('ready', resolve)
      client.once('end', () => reject(new Error('ioredis cluster ended before ready')))
    })
    return {
      kind,
      raw: client,
      store: new RedisStore(client, options),
      pttl: (key) => client.pttl(key),
      exists: async (key) => (await client.exists(key)) === 1,
      zcard: (key) => client.zcard(key),
      close: async () => {
        client.disconnect()
      },
    }
  }
  const client = createCluster({
    rootNodes: cluster.rootNodes,
    defaults: { socket: { reconnectStrategy: () => 100 } },
  })
  client.on('error', () => {})
  await client.connect()
  return {
    kind,
    raw: client,
    store: new RedisStore(client, options),
    pttl: (key) => client.pTTL(key),
    exists: async (key) => (await client.exists(key)) === 1,
    zcard: (key) => client.zCard(key),
    close: async () => {
      try {
        client.destroy()
      } catch {}
    },
  }
}

export async function clusterFixture(kind: ClusterKind, cluster: RedisClusterHandle): Promise<StoreFixture> {
  // The suite checks decisions, not deadlines: a loaded machine must not turn a slow script (a large
  // sliding-log cost) into the failure policy's answer, by GLIDE's own 250 ms or the limiter's 500 ms.
  const c = await clusterClient(kind, cluster, undefined, 5000)
  return { store: c.store, close: c.close, pttl: c.pttl, exists: c.exists, zcard: c.zcard, timeoutMs: 5000 }
}

/** One primary as CLUSTER SLOTS describes it. */
export interface Owner {
  port: number
  id: string
}

/** slot → owning primary, asked of one node (`port`). */
export async function slotOwners(port: number): Promise<Owner[]> {
  const reply = (await respCommand(port, ['CLUSTER', 'SLOTS'])) as [
    number,
    number,
    [string, number, string],
  ][]
  const owners = new Array<Owner>(16384)
  for (const [start, end, [, p, id]] of reply) {
    for (let s = start; s <= end; s++) owners[s] = { port: Number(p), id }
  }
  return owners
}

/** Calls per command name on one node, from INFO commandstats. */
export async function commandCalls(port: number): Promise<Record<string, number>> {
  const info = String(await respCommand(port, ['INFO', 'commandstats']))
  const out: Record<string, number> = {}
  for (const m of info.matchAll(/cmdstat_([a-z_|]+):calls=(\d+)/g)) out[m[1]!] = Number(m[2])
  return out
}
