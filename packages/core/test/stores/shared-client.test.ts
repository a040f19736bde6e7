/**
 * Two RedisStore objects over one client reach the same keys, so they are one store to the check that
 * refuses two limiters with different policies on one prefix: the README's two limiters, each with its
 * own `new RedisStore(redis)` and the default prefix, are refused at construction for every client
 * family, standalone and cluster. Stores over different clients stay separate (another process).
 */
import {
  type RedisClusterHandle,
  redisUrl,
  startRedisCluster,
  startUpstashServer,
  type UpstashServer,
} from '@tollgate/testkit'
import { Redis as Upstash } from '@upstash/redis'
import Redis from 'ioredis'
import { createClient } from 'redis'
import { ConfigError, RateLimiter, RedisStore } from '../../src'
import { glide, readyIoredis, readyIovalkey } from '../clients'
import { type ClusterKind, clusterClient } from '../cluster-clients'

interface Opened {
  raw: object
  close(): Promise<void> | void
}

/** The README's pair: each limiter with its own store over `raw`, the default prefix. */
function expectRefused(raw: object): void {
  const first = new RateLimiter({ store: new RedisStore(raw), limit: 100, window: '1m' })
  let error: unknown
  try {
    new RateLimiter({ store: new RedisStore(raw), limit: 3, window: '1m' })
  } catch (e) {
    error = e
  }
  expect(error).toBeInstanceOf(ConfigError)
  const e = error as ConfigError
  expect(e.option).toBe('prefix')
  expect(e.received).toBe('tollgate')
  expect(e.message).toContain('"tollgate" (sliding-window 3/1m)')
  expect(e.message).toContain('"tollgate" (sliding-window 100/1m)')
  // The same limiter built again, over a third store, shares state on purpose: allowed.
  new RateLimiter({ store: new RedisStore(raw), limit: 100, window: '1m' })
  expect(first.prefix).toBe('tollgate')
}

describe('two stores over one client', () => {
  let rest: UpstashServer | undefined
  afterAll(() => rest?.stop())

  const standalone: [string, () => Promise<Opened>][] = [
    [
      'node-redis',
      async () => {
        const client = await createClient({ url: redisUrl() })
          .on('error', () => {})
          .connect()
        return { raw: client, close: () => void client.destroy() }
      },
    ],
    [
      'ioredis',
      async () => {
        const client = await readyIoredis()
        return { raw: client, close: () => client.disconnect() }
      },
    ],
    [
      'iovalkey',
      async () => {
        const client = await readyIovalkey()
        return { raw: client, close: () => client.disconnect() }
      },
    ],
    [
      'valkey-glide',
      async () => {
        const client = await glide()
        return { raw: client, close: () => client.close() }
      },
    ],
    [
      '@upstash/redis',
      async () => {
        rest ??= await startUpstashServer({ redisPort: Number(new URL(redisUrl()).port) })
        return { raw: new Upstash({ url: rest.url, token: rest.token, retry: false }), close: () => {} }
      },
    ],
  ]

  it.each(standalone)('%s: different policies on the default prefix are refused', async (_kind, open) => {
    const client = await open()
    try {
      expectRefused(client.raw)
    } finally {
      await client.close()
    }
  })

  it('stores over two clients stay apart (as two processes would)', async () => {
    const one = await readyIoredis()
    const two = new Redis(redisUrl())
    try {
      new RateLimiter({ store: new RedisStore(one), limit: 100, window: '1m' })
      expect(() => new RateLimiter({ store: new RedisStore(two), limit: 3, window: '1m' })).not.toThrow()
    } finally {
      one.disconnect()
      two.disconnect()
    }
  })

  describe('on a cluster', () => {
    let cluster: RedisClusterHandle
    beforeAll(async () => {
      cluster = await startRedisCluster()
    }, 60_000)
    afterAll(() => cluster?.stop())

    it.each<ClusterKind>(['node-redis', 'ioredis', 'iovalkey', 'valkey-glide'])(
      '%s cluster: different policies on the default prefix are refused',
      async (kind) => {
        const client = await clusterClient(kind, cluster)
        try {
          expectRefused(client.raw as object)
        } finally {
          await client.close()
        }
      },
      20_000,
    )
  })
})
