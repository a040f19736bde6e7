/** Test clients against the suite's redis-server (REDIS_URL from the jest global setup). */
import { redisUrl } from '@tollgate/testkit'
import type { StoreFixture } from '@tollgate/testkit/store-suite'
import { GlideClient, Logger } from '@valkey/valkey-glide'
import Redis from 'ioredis'
import Valkey from 'iovalkey'
import { createClient, type RedisClientType } from 'redis'
import { RedisStore, type RedisStoreOptions } from '../src'

export async function nodeRedis(RESP: 2 | 3 = 3) {
  const client = createClient({ url: redisUrl(), RESP })
  client.on('error', () => {})
  await client.connect()
  return client
}

export function ioredis() {
  return new Redis(redisUrl(), { lazyConnect: false })
}

export async function nodeRedisFixture(RESP: 2 | 3 = 3, options?: RedisStoreOptions): Promise<StoreFixture> {
  const client = await nodeRedis(RESP)
  return {
    store: new RedisStore(client, options),
    close: async () => {
      await client.quit()
    },
    pttl: (key) => client.pTTL(key),
    exists: async (key) => (await client.exists(key)) === 1,
    zcard: (key) => client.zCard(key),
  }
}

/**
 * An ioredis client once it is ready: calls made before its first 'ready' wait for it within their
 * deadline (never in the client's offline queue, docs/failure-modes.md); tests start from a ready client.
 */
export async function readyIoredis(): Promise<Redis> {
  const client = ioredis()
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
  return client
}

export async function ioredisFixture(options?: RedisStoreOptions): Promise<StoreFixture> {
  const client = await readyIoredis()
  return {
    store: new RedisStore(client, options),
    close: async () => {
      client.disconnect()
    },
    pttl: (key) => client.pttl(key),
    exists: async (key) => (await client.exists(key)) === 1,
    zcard: (key) => client.zcard(key),
  }
}

/** iovalkey (Valkey's fork of ioredis) once it is ready, like {@link readyIoredis}. */
export async function readyIovalkey(url = redisUrl()): Promise<Valkey> {
  const client = new Valkey(url, { lazyConnect: false })
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
  return client
}

export async function iovalkeyFixture(options?: RedisStoreOptions): Promise<StoreFixture> {
  const client = await readyIovalkey()
  return {
    store: new RedisStore(client, options),
    close: async () => {
      client.disconnect()
    },
    pttl: (key) => client.pttl(key),
    exists: async (key) => (await client.exists(key)) === 1,
    zcard: (key) => client.zcard(key),
  }
}

// GLIDE's core logs every error reply (NOSCRIPT included) at 'warn' on stdout.
let glideQuiet = false

/** A Valkey GLIDE standalone client on `url` (the suite's server by default). */
export async function glide(url = redisUrl(), requestTimeout?: number): Promise<GlideClient> {
  if (!glideQuiet) {
    Logger.setLoggerConfig('off')
    glideQuiet = true
  }
  const { hostname, port } = new URL(url)
  return GlideClient.createClient({ addresses: [{ host: hostname, port: Number(port) }], requestTimeout })
}

export async function glideFixture(options?: RedisStoreOptions): Promise<StoreFixture> {
  const client = await glide()
  return {
    store: new RedisStore(client, options),
    close: async () => {
      client.close()
    },
    pttl: (key) => client.pttl(key),
    exists: async (key) => (await client.exists([key])) === 1,
    zcard: (key) => client.zcard(key),
  }
}

type NodeRedis = RedisClientType<any, any, any>

/**
 * Two node-redis clients on the suite's server, opened before the file's tests and closed after: two
 * processes' connections. Read them inside tests (`clients.one`, `clients.two`).
 */
export function twoClients(): { readonly one: NodeRedis; readonly two: NodeRedis } {
  const held: { one: NodeRedis; two: NodeRedis } = {} as never
  beforeAll(async () => {
    held.one = (await nodeRedis()) as NodeRedis
    held.two = (await nodeRedis()) as NodeRedis
  })
  afterAll(async () => {
    await held.one?.quit()
    await held.two?.quit()
  })
  return held
}
