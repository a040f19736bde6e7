/**
 * A call answered by the failure policy is never charged later: Redis is SIGKILLed, calls are made (the
 * first ones in the turn before the client reads the close, so they sit unwritten in its queue), Redis is
 * restarted empty on the same port, and once the client is ready again a separate connection finds no
 * key of the identity before any new call. Run for node-redis, ioredis, iovalkey and Valkey GLIDE with
 * the options users set, both failure policies and every algorithm, on one node and (node-redis, ioredis)
 * on a cluster, where the primary owning the identity's slot is the one killed, and comes back with its
 * slots.
 */
import {
  at,
  type RedisClusterHandle,
  type RedisServerHandle,
  respCommand,
  sleepAtLeast as sleep,
  startRedisCluster,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { GlideClient, type GlideClientConfiguration, Logger } from '@valkey/valkey-glide'
import Redis, { type ClusterOptions, type RedisOptions } from 'ioredis'
import Valkey, { type RedisOptions as ValkeyOptions } from 'iovalkey'
import { createClient, createCluster, type RedisClientOptions, type RedisClusterOptions } from 'redis'
import { type Algorithm, RateLimiter, RedisStore } from '../src'
import { keySlot } from '../src/stores/redis/cluster-slot'
import { slotOwners } from './cluster-clients'

const ALGORITHMS: readonly Algorithm[] = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'gcra',
]

interface Setup {
  readonly name: string
  open(url: string): Opened | Promise<Opened>
}

interface Opened {
  raw: any
  ready(): boolean
  close(): void
}

const nodeRedis =
  (options: RedisClientOptions): Setup['open'] =>
  (url) => {
    const client = createClient({ url, ...options })
    client.on('error', () => {})
    client.connect().catch(() => {})
    return {
      raw: client,
      ready: () => client.isReady,
      close: () => {
        try {
          client.destroy()
        } catch {}
      },
    }
  }

const ioredis =
  (options: RedisOptions): Setup['open'] =>
  (url) => {
    const client = new Redis(url, options)
    client.on('error', () => {})
    return { raw: client, ready: () => client.status === 'ready', close: () => client.disconnect() }
  }

const iovalkey =
  (options: ValkeyOptions): Setup['open'] =>
  (url) => {
    const client = new Valkey(url, options)
    client.on('error', () => {})
    return { raw: client, ready: () => client.status === 'ready', close: () => client.disconnect() }
  }

/** GLIDE has no readiness to read: a PING of the same client every 20 ms tells the test. */
const glide =
  (options: Partial<GlideClientConfiguration>): Setup['open'] =>
  async (url) => {
    Logger.setLoggerConfig('off')
    const { hostname, port } = new URL(url)
    const client = await GlideClient.createClient({
      addresses: [{ host: hostname, port: Number(port) }],
      ...options,
    })
    let ready = false
    const probe = setInterval(() => {
      client.ping().then(
        () => (ready = true),
        () => (ready = false),
      )
    }, 20)
    return {
      raw: client,
      ready: () => ready,
      close: () => {
        clearInterval(probe)
        client.close()
      },
    }
  }

const SETUPS: Setup[] = [
  { name: 'node-redis, defaults', open: nodeRedis({}) },
  { name: 'node-redis, offline queue on', open: nodeRedis({ disableOfflineQueue: false }) },
  { name: 'ioredis, defaults', open: ioredis({}) },
  { name: 'ioredis, maxRetriesPerRequest 20', open: ioredis({ maxRetriesPerRequest: 20 }) },
  { name: 'ioredis, lazyConnect', open: ioredis({ lazyConnect: true }) },
  { name: 'iovalkey, defaults', open: iovalkey({}) },
  { name: 'iovalkey, maxRetriesPerRequest 20', open: iovalkey({ maxRetriesPerRequest: 20 }) },
  { name: 'iovalkey, lazyConnect', open: iovalkey({ lazyConnect: true }) },
  { name: 'Valkey GLIDE, defaults', open: glide({}) },
  // The longest requestTimeout that keeps the guarantee: the limiters' timeoutMs below.
  { name: 'Valkey GLIDE, requestTimeout = timeoutMs', open: glide({ requestTimeout: 300 }) },
  { name: 'Valkey GLIDE, lazyConnect', open: glide({ lazyConnect: true }) },
]

/** Blocks the thread: the killed server's close reaches the kernel, not yet the client. */
function busyWait(ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) {}
}

async function until(check: () => boolean, withinMs: number): Promise<void> {
  const start = performance.now()
  while (!check()) {
    if (performance.now() - start > withinMs) throw new Error('condition not met in time')
    await sleep(10)
  }
}

describe.each(SETUPS)('$name', (setup) => {
  let server: RedisServerHandle
  beforeEach(async () => {
    server = await startRedisServer()
  })
  afterEach(async () => {
    await server.stop()
  })

  it.each(['deny', 'allow'] as const)(
    "Redis killed, calls answered by '%s', Redis back empty: no key of the identity exists",
    async (onStoreError) => {
      const client = await setup.open(server.url)
      const store = new RedisStore(client.raw)
      const prefix = uniquePrefix('outage')
      const limiters = ALGORITHMS.map(
        (algorithm) =>
          new RateLimiter({
            store,
            prefix: `${prefix}-${algorithm}`,
            limit: 100,
            window: '1d',
            algorithm,
            onStoreError,
            timeoutMs: 300,
          }),
      )
      try {
        // Connected (lazyConnect: by the first call), scripts loaded, on another identity.
        for (let i = 0; i < 100 && !client.ready(); i++) {
          await Promise.all(limiters.map((l) => l.consume('warm')))
          await sleep(20)
        }
        for (const l of limiters) expect((await l.consume('warm')).source).toBe('store')

        process.kill(server.pid, 'SIGKILL')
        busyWait(100)
        // A check-phase call: the client queues it and writes it in the next check phase, after the
        // poll phase in which it reads the close.
        const first = await new Promise<Promise<unknown>[]>((resolve) =>
          setImmediate(() => resolve(limiters.map((l) => l.consume('victim')))),
        )
        const answered = [...(await Promise.all(first))] as { source: string; allowed: boolean }[]
        await server.kill()
        for (let round = 0; round < 3; round++) {
          answered.push(...(await Promise.all(limiters.map((l) => l.consume('victim')))))
          await sleep(100)
        }
        for (const d of answered) {
          expect(d).toMatchObject({ source: 'fallback', allowed: onStoreError === 'allow' })
        }

        await server.start()
        await until(client.ready, 15_000)
        await sleep(300) // what the client held would be written right after 'ready'
        const keys = await respCommand(server.port, ['KEYS', `${prefix}*{victim}*`])
        expect(keys).toEqual([])
      } finally {
        client.close()
      }
    },
    30_000,
  )
})

// ---- clusters ------------------------------------------------------------------------------------------

interface ClusterSetup {
  readonly name: string
  /** `probe` resolves once a command of the test's own on the identity's slot was answered. */
  open(cluster: RedisClusterHandle): { raw: any; probe(key: string): Promise<unknown>; close(): void }
}

const nodeRedisCluster =
  (options: Partial<RedisClusterOptions>): ClusterSetup['open'] =>
  (cluster) => {
    const client = createCluster({ rootNodes: cluster.rootNodes, ...options })
    client.on('error', () => {})
    client.connect().catch(() => {})
    return {
      raw: client,
      probe: (key) => client.get(key),
      close: () => {
        try {
          client.destroy()
        } catch {}
      },
    }
  }

const ioredisCluster =
  (options: ClusterOptions): ClusterSetup['open'] =>
  (cluster) => {
    const client = new Redis.Cluster(
      cluster.nodes.map((n) => ({ host: n.host, port: n.port })),
      options,
    )
    client.on('error', () => {})
    return { raw: client, probe: (key) => client.get(key), close: () => client.disconnect() }
  }

const CLUSTER_SETUPS: ClusterSetup[] = [
  { name: 'node-redis cluster, defaults', open: nodeRedisCluster({}) },
  {
    name: 'node-redis cluster, offline queue on, reconnect every 100 ms',
    open: nodeRedisCluster({
      defaults: { disableOfflineQueue: false, socket: { reconnectStrategy: () => 100 } },
    }),
  },
  { name: 'ioredis Cluster, defaults', open: ioredisCluster({}) },
  {
    name: 'ioredis Cluster, maxRetriesPerRequest 20, nodes reconnect, long retry delays',
    open: ioredisCluster({
      redisOptions: { maxRetriesPerRequest: 20 },
      clusterNodeRetryStrategy: () => 100,
      retryDelayOnFailover: 500,
      retryDelayOnClusterDown: 500,
    }),
  },
  { name: 'ioredis Cluster, lazyConnect', open: ioredisCluster({ lazyConnect: true }) },
]

describe.each(CLUSTER_SETUPS)('$name', (setup) => {
  let cluster: RedisClusterHandle
  beforeAll(async () => {
    // A node timeout longer than the outage: the others only suspect the killed primary (PFAIL), so it
    // rejoins with its slots as soon as it is back, with no failover (there are no replicas).
    cluster = await startRedisCluster({ nodeTimeoutMs: 30_000 })
  }, 60_000)
  afterAll(async () => {
    await cluster?.stop()
  })

  it.each(['deny', 'allow'] as const)(
    "the identity's primary killed, calls answered by '%s', back empty: no key of the identity exists",
    async (onStoreError) => {
      const identity = 'victim'
      const owner = at(await slotOwners(at(cluster.nodes, 0).port), keySlot(`{${identity}}`)).port
      const client = setup.open(cluster)
      const store = new RedisStore(client.raw)
      const prefix = uniquePrefix('cluster-outage')
      const limiters = ALGORITHMS.map(
        (algorithm) =>
          new RateLimiter({
            store,
            prefix: `${prefix}-${algorithm}`,
            limit: 100,
            window: '1d',
            algorithm,
            onStoreError,
            timeoutMs: 300,
          }),
      )
      try {
        // Connected (lazyConnect: by the first calls), scripts loaded on the owner, on the same slot.
        let warm: { source: string }[] = []
        for (let i = 0; i < 100; i++) {
          warm = await Promise.all(limiters.map((l) => l.consume(`{${identity}}warm`)))
          if (warm.every((d) => d.source === 'store')) break
          await sleep(50)
        }
        for (const d of warm) expect(d.source).toBe('store')

        process.kill(cluster.nodes.find((n) => n.port === owner)!.pid, 'SIGKILL')
        busyWait(100)
        // Check-phase calls: handed to the client before it reads the close (see the single-node case).
        const first = await new Promise<Promise<unknown>[]>((resolve) =>
          setImmediate(() => resolve(limiters.map((l) => l.consume(identity)))),
        )
        const answered = [...(await Promise.all(first))] as { source: string; allowed: boolean }[]
        await cluster.killNode(owner)
        for (let round = 0; round < 3; round++) {
          answered.push(...(await Promise.all(limiters.map((l) => l.consume(identity)))))
          await sleep(100)
        }
        for (const d of answered) {
          expect(d).toMatchObject({ source: 'fallback', allowed: onStoreError === 'allow' })
        }

        await cluster.restartNode(owner)
        await cluster.waitOk(20_000)
        // The client reached the owner again: what any of its queues held would be written by now.
        const start = performance.now()
        for (;;) {
          try {
            await client.probe(`{${identity}}probe`)
            break
          } catch (error) {
            if (performance.now() - start > 15_000) throw error
            await sleep(50)
          }
        }
        await sleep(1_000) // the longest retry delay above, twice
        for (const node of cluster.nodes) {
          expect(await respCommand(node.port, ['KEYS', `${prefix}*{${identity}}*`])).toEqual([])
        }
      } finally {
        client.close()
      }
    },
    60_000,
  )
})

describe('a cluster client booted with every node down', () => {
  let cluster: RedisClusterHandle
  beforeAll(async () => {
    cluster = await startRedisCluster({ nodeTimeoutMs: 30_000 })
  }, 60_000)
  afterAll(async () => {
    await cluster?.stop()
  })

  const boots: { name: string; open(): { raw: any; close(): void } }[] = [
    {
      name: 'node-redis createCluster, connect() retried as the docs do',
      open: () => {
        const client = createCluster({ rootNodes: cluster.rootNodes }).on('error', () => {})
        let closed = false
        // connect() rejects once when no root node answers, and does not retry by itself.
        const connect = (): void => {
          if (!closed) client.connect().catch(() => setTimeout(connect, 200))
        }
        connect()
        return {
          raw: client,
          close: () => {
            closed = true
            try {
              client.destroy()
            } catch {}
          },
        }
      },
    },
    {
      name: 'ioredis Cluster',
      open: () => {
        const client = new Redis.Cluster(cluster.nodes.map((n) => ({ host: n.host, port: n.port })))
        client.on('error', () => {})
        return { raw: client, close: () => client.disconnect() }
      },
    },
  ]

  it.each(boots)(
    '$name: the failure policy answers, then Redis decides once the cluster is up',
    async (boot) => {
      for (const node of cluster.nodes) await cluster.killNode(node.port)
      const client = boot.open()
      try {
        const limiter = new RateLimiter({
          store: new RedisStore(client.raw),
          prefix: uniquePrefix('cluster-boot'),
          limit: 5,
          window: '1d',
          onStoreError: 'deny',
          timeoutMs: 300,
        })
        expect(await limiter.consume('u')).toMatchObject({ source: 'fallback', allowed: false })
        for (const node of cluster.nodes) await cluster.restartNode(node.port)
        await cluster.waitOk(20_000)
        let decision = await limiter.consume('u')
        const start = performance.now()
        while (decision.source !== 'store') {
          if (performance.now() - start > 20_000) throw new Error('the store never decided')
          await sleep(100)
          decision = await limiter.consume('u')
        }
        // Only the call Redis decided was charged (limit 5).
        expect(decision).toMatchObject({ allowed: true, remaining: 4 })
      } finally {
        client.close()
      }
    },
    60_000,
  )
})
