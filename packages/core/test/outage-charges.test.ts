/**
 * A call answered by the failure policy is never charged later: Redis is SIGKILLed, calls are made (the
 * first ones in the turn before the client reads the close, so they sit unwritten in its queue), Redis is
 * restarted empty on the same port, and once the client is ready again a separate connection finds no
 * key of the identity before any new call. Run for node-redis, ioredis, iovalkey and Valkey GLIDE with
 * the options users set, both failure policies and every algorithm.
 */
import { type RedisServerHandle, respCommand, startRedisServer } from '@tollgate/testkit'
import { GlideClient, type GlideClientConfiguration, Logger } from '@valkey/valkey-glide'
import Redis, { type RedisOptions } from 'ioredis'
import Valkey, { type RedisOptions as ValkeyOptions } from 'iovalkey'
import { createClient, type RedisClientOptions } from 'redis'
import { uniquePrefix } from '../../testkit/src/store-suite'
import { sleepAtLeast as sleep } from '../../testkit/src/time'
import { type Algorithm, RateLimiter, RedisStore } from '../src'

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
