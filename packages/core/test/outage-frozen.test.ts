/**
 * A call answered by the failure policy is never charged later, also when Redis was only slow: the
 * server is frozen (SIGSTOP) with calls on their way, they pass their deadline and take the failure
 * policy, and the server resumes (SIGCONT) to find them in its socket buffers. Each spending script
 * carries the last server time at which it may act, so those calls change nothing when they finally run.
 * Also through a network that delivers the calls late (a proxy that holds them past the deadline), and
 * on a cluster whose primary owning the identity's slot is the one frozen.
 */
import {
  at,
  type RedisClusterHandle,
  type RedisServerHandle,
  respCommand,
  sleepAtLeast as sleep,
  startDelayProxy,
  startRedisCluster,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import Redis from 'ioredis'
import { createClient, createCluster } from 'redis'
import { type Algorithm, type Decision, RateLimiter, RedisStore, type TollgateEvent } from '../src'
import { keySlot } from '../src/stores/redis/cluster-slot'
import { slotOwners } from './cluster-clients'

const DEADLINE = 150
const LIMIT = 100

type Kind = 'node-redis' | 'ioredis'

interface Opened {
  raw: any
  ready: Promise<unknown>
  close(): void
}

function open(kind: Kind, url: string): Opened {
  if (kind === 'ioredis') {
    const client = new Redis(url, { retryStrategy: () => 100 })
    client.on('error', () => {})
    return {
      raw: client,
      ready: new Promise<void>((resolve) => client.once('ready', () => resolve())),
      close: () => client.disconnect(),
    }
  }
  const client = createClient({ url, socket: { reconnectStrategy: () => 100 } })
  client.on('error', () => {})
  return {
    raw: client,
    ready: client.connect().catch(() => {}),
    close: () => {
      try {
        client.destroy()
      } catch {}
    },
  }
}

/** Polls until a peek is answered by the store again (the breaker's cool-down, then a probe). */
async function fromStoreAgain(limiter: RateLimiter): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await limiter.peek('k')).source === 'store') return
    await sleep(100)
  }
  throw new Error('the store never answered again')
}

/** Six calls started in one go: three in turns of their own (a script each), then three in one turn (one alone, two batched). */
async function sixCalls(limiter: RateLimiter): Promise<Decision[]> {
  const calls: Promise<Decision>[] = []
  for (let i = 0; i < 3; i++) {
    calls.push(limiter.consume('k'))
    await new Promise((resolve) => setImmediate(resolve))
  }
  calls.push(limiter.consume('k'), limiter.consume('k'), limiter.consume('k'))
  return Promise.all(calls)
}

/** One call: fewer timeouts than drop a connection, so its late reply comes back on it. */
const oneCall = async (limiter: RateLimiter): Promise<Decision[]> => [await limiter.consume('k')]

/**
 * Spends 3 through the store, runs `stall` (which makes the next calls late), makes the `late` calls,
 * lets `resume` deliver them, then reads what the identity has spent (3 when nothing late was applied)
 * and how many calls the store reported as expired.
 */
async function answeredNotCharged(
  client: Opened,
  algorithm: Algorithm,
  late: (limiter: RateLimiter) => Promise<Decision[]>,
  stall: () => Promise<void> | void,
  resume: () => Promise<void> | void,
): Promise<{ spent: number; expired: number }> {
  await client.ready
  const events: TollgateEvent[] = []
  const store = new RedisStore(client.raw, { onEvent: (e) => events.push(e) })
  const limiter = new RateLimiter({
    store,
    prefix: uniquePrefix(`frozen-${algorithm}`),
    limit: LIMIT,
    window: '1d', // no window boundary falls inside the test
    algorithm,
    timeoutMs: DEADLINE,
    onStoreError: 'allow',
  })
  try {
    for (let i = 0; i < 3; i++) expect((await limiter.consume('k')).source).toBe('store')
    await stall()
    const during = await late(limiter)
    for (const d of during) expect(d).toMatchObject({ allowed: true, source: 'fallback' })
    await resume()
    await fromStoreAgain(limiter)
    await sleep(300) // a late call still in a buffer would have run by now
    const after = await limiter.peek('k')
    expect(after.source).toBe('store')
    return { spent: LIMIT - after.remaining, expired: events.filter((e) => e.type === 'expired-call').length }
  } finally {
    client.close()
  }
}

describe('a call answered by the failure policy is never charged later (slow, not gone)', () => {
  let server: RedisServerHandle

  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(async () => {
    if (server?.running) process.kill(server.pid, 'SIGCONT')
    await server?.stop()
  })

  const freeze = () => {
    process.kill(server.pid, 'SIGSTOP')
  }
  const thaw = async () => {
    await sleep(DEADLINE) // well past every deadline: each call has been answered
    process.kill(server.pid, 'SIGCONT')
  }

  describe.each(['node-redis', 'ioredis'] as const)('%s', (kind) => {
    it.each(['fixed-window', 'sliding-window', 'token-bucket'] as const)(
      'server frozen (SIGSTOP) past the deadline, then resumed: %s stays at 3',
      async (algorithm) => {
        const { spent } = await answeredNotCharged(open(kind, server.url), algorithm, sixCalls, freeze, thaw)
        expect(spent).toBe(3)
      },
      20_000,
    )

    it('a late call that comes back on its connection is reported as expired, not applied', async () => {
      const { spent, expired } = await answeredNotCharged(
        open(kind, server.url),
        'gcra',
        oneCall,
        freeze,
        thaw,
      )
      expect(spent).toBe(3)
      expect(expired).toBe(1)
    }, 20_000)

    it('calls delivered late by the network (held past the deadline) are not applied', async () => {
      const proxy = await startDelayProxy(server.port)
      try {
        const { spent } = await answeredNotCharged(
          open(kind, proxy.url),
          'fixed-window',
          sixCalls,
          () => proxy.holdRequests(),
          async () => {
            await sleep(DEADLINE)
            await proxy.release()
          },
        )
        expect(spent).toBe(3)
      } finally {
        await proxy.close()
      }
    }, 20_000)

    // What remains (docs/failure-modes.md): the script ran in time, so it spent; only its reply was late.
    it('what remains: a reply held past the deadline, from a script that ran in time, is charged', async () => {
      const proxy = await startDelayProxy(server.port)
      try {
        const { spent, expired } = await answeredNotCharged(
          open(kind, proxy.url),
          'fixed-window',
          oneCall,
          () => proxy.holdReplies(),
          async () => {
            await sleep(DEADLINE)
            await proxy.release()
          },
        )
        expect(spent).toBe(4)
        expect(expired).toBe(0)
      } finally {
        await proxy.close()
      }
    }, 20_000)
  })
})

describe("each call acts by its own limiter's deadline", () => {
  let server: RedisServerHandle
  beforeAll(async () => {
    server = await startRedisServer()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it("a slow server past a short limiter's deadline still serves a patient limiter of the same store", async () => {
    const client = open('node-redis', server.url)
    await client.ready
    const store = new RedisStore(client.raw)
    const prefix = uniquePrefix('patient')
    const hasty = new RateLimiter({ store, prefix: `${prefix}-h`, limit: 10, window: '1d', timeoutMs: 100 })
    const patient = new RateLimiter({
      store,
      prefix: `${prefix}-p`,
      limit: 10,
      window: '1d',
      timeoutMs: 10_000,
    })
    try {
      expect((await hasty.consume('k')).source).toBe('store') // the store has learnt the server's time
      const sleeping = respCommand(server.port, ['DEBUG', 'SLEEP', '0.5'], { timeoutMs: 5000 })
      await sleep(50)
      const d = await patient.consume('k') // reaches Redis after the hasty limiter's deadline, not its own
      await sleeping
      expect(d).toMatchObject({ source: 'store', allowed: true, remaining: 9 })
    } finally {
      client.close()
    }
  }, 20_000)
})

describe("a cluster: the identity's primary frozen past the deadline, then resumed", () => {
  let cluster: RedisClusterHandle
  let owner: { pid: number }
  beforeAll(async () => {
    // A node timeout far longer than the freeze: the other primaries never fail it over.
    cluster = await startRedisCluster({ nodeTimeoutMs: 30_000 })
    const port = at(await slotOwners(at(cluster.nodes, 0).port), keySlot('{k}')).port
    owner = cluster.nodes.find((n) => n.port === port)!
  }, 60_000)
  afterAll(async () => {
    if (owner) process.kill(owner.pid, 'SIGCONT')
    await cluster?.stop()
  })
  const freeze = () => {
    process.kill(owner.pid, 'SIGSTOP')
  }
  const thaw = async () => {
    await sleep(DEADLINE)
    process.kill(owner.pid, 'SIGCONT')
  }

  it('node-redis cluster: stays at 3', async () => {
    const client = createCluster({ rootNodes: cluster.rootNodes })
    client.on('error', () => {})
    const opened: Opened = {
      raw: client,
      ready: client.connect().catch(() => {}),
      close: () => {
        try {
          client.destroy()
        } catch {}
      },
    }
    const { spent } = await answeredNotCharged(opened, 'fixed-window', sixCalls, freeze, thaw)
    expect(spent).toBe(3)
  }, 30_000)

  it('ioredis Cluster: stays at 3', async () => {
    const client = new Redis.Cluster(cluster.nodes.map((n) => ({ host: n.host, port: n.port })))
    client.on('error', () => {})
    const opened: Opened = {
      raw: client,
      ready: new Promise<void>((resolve) => client.once('ready', () => resolve())),
      close: () => client.disconnect(),
    }
    const { spent } = await answeredNotCharged(opened, 'sliding-window', sixCalls, freeze, thaw)
    expect(spent).toBe(3)
  }, 30_000)
})
