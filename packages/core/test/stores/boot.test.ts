/**
 * Calls made before a client's first connection (a cold start: the client created and used at once, its
 * `connect()` not awaited) wait for that connection within the limiter's deadline and are decided by
 * Redis, for every TCP client family; a client whose server never comes up answers by the failure policy
 * at the deadline. Against real redis-servers; no assertion on timings.
 */
import { freePort, type RedisClusterHandle, redisUrl, startRedisCluster } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import Redis from 'ioredis'
import Valkey from 'iovalkey'
import { createClient, createCluster } from 'redis'
import { type Decision, RateLimiter, RedisStore, type TollgateEvent } from '../../src'

// Day-long windows: no window boundary falls inside a test.
const WINDOW = '1d'
// Generous: the first connection of a loaded machine (a cluster's discovery and one connection per
// master, with other suites running) must fit in it; a call that is ready returns long before.
const DEADLINE = 10_000

interface Opened {
  raw: any
  close(): void
}

/** A client created as the README does and used at once: its first connection is still under way. */
function openAtBoot(kind: string, url: string): Opened {
  if (kind === 'ioredis' || kind === 'iovalkey' || kind === 'ioredis lazy') {
    const options = { lazyConnect: kind === 'ioredis lazy' }
    const client = kind === 'iovalkey' ? new Valkey(url, options) : new Redis(url, options)
    client.on('error', () => {})
    return { raw: client, close: () => client.disconnect() }
  }
  const client = createClient({ url })
  client.on('error', () => {})
  client.connect().catch(() => {})
  return {
    raw: client,
    close: () => {
      try {
        client.destroy()
      } catch {}
    },
  }
}

/** The reason a store-error or timeout event gives, to show beside counts that differ. */
function reason(e: TollgateEvent): string[] {
  if (e.type === 'timeout') return ['timeout']
  if (e.type === 'store-error') return [`store-error: ${(e.error as Error)?.message ?? String(e.error)}`]
  return []
}

function count(decisions: Decision[], events: TollgateEvent[] = []) {
  return {
    allowed: decisions.filter((d) => d.allowed).length,
    fallback: decisions.filter((d) => d.source === 'fallback').length,
    // Why a call fell back, shown when the counts differ.
    errors: [...new Set(events.flatMap(reason))],
  }
}

describe('calls made before the first connection', () => {
  it.each([
    ['node-redis', 50, 3],
    ['ioredis', 200, 5],
    ['iovalkey', 200, 5],
    ['ioredis lazy', 200, 5],
  ])('%s: %i simultaneous calls at boot, limit %i: Redis decides every one', async (kind, calls, limit) => {
    const client = openAtBoot(kind, redisUrl())
    const events: TollgateEvent[] = []
    try {
      expect(kind === 'node-redis' ? client.raw.isReady : client.raw.status === 'ready').toBe(false)
      const limiter = new RateLimiter({
        store: new RedisStore(client.raw),
        prefix: uniquePrefix('boot'),
        limit,
        window: WINDOW,
        timeoutMs: DEADLINE,
        onEvent: (e) => events.push(e),
      })
      const decisions = await Promise.all(Array.from({ length: calls }, () => limiter.consume('k')))
      expect(count(decisions, events)).toEqual({ allowed: limit, fallback: 0, errors: [] })
      expect(decisions.every((d) => d.source === 'store')).toBe(true)
    } finally {
      client.close()
    }
  })

  it.each(['node-redis', 'ioredis', 'iovalkey'])(
    '%s: a server that never comes up: the failure policy answers at the deadline',
    async (kind) => {
      const client = openAtBoot(kind, `redis://127.0.0.1:${await freePort()}`)
      const events: TollgateEvent[] = []
      const warn = jest.spyOn(console, 'warn').mockImplementation(() => {})
      try {
        const limiter = new RateLimiter({
          store: new RedisStore(client.raw),
          prefix: uniquePrefix('never'),
          limit: 3,
          window: WINDOW,
          timeoutMs: 300,
          onStoreError: 'deny',
          onEvent: (e) => events.push(e),
        })
        const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.consume('k')))
        for (const d of decisions) expect(d).toMatchObject({ allowed: false, source: 'fallback' })
        const errors = events.filter((e) => e.type === 'store-error' || e.type === 'timeout')
        expect(errors.length).toBeGreaterThan(0)
        expect(warn.mock.calls.some(([m]) => String(m).includes('WARN_TOLLGATE_NOT_READY_AT_BOOT'))).toBe(
          true,
        )
      } finally {
        warn.mockRestore()
        client.close()
      }
    },
  )

  describe('on a cluster', () => {
    let cluster: RedisClusterHandle
    beforeAll(async () => {
      cluster = await startRedisCluster()
    }, 60_000)
    afterAll(() => cluster?.stop())

    it.each(['node-redis', 'ioredis', 'iovalkey'])(
      '%s cluster: 50 simultaneous calls at boot, limit 3: Redis decides every one',
      async (kind) => {
        let raw: any
        const events: TollgateEvent[] = []
        if (kind === 'node-redis') {
          raw = createCluster({ rootNodes: cluster.rootNodes })
          raw.on('error', () => {})
          raw.connect().catch(() => {})
        } else {
          const Cluster = kind === 'ioredis' ? Redis.Cluster : Valkey.Cluster
          raw = new Cluster(cluster.nodes.map((n) => ({ host: n.host, port: n.port })))
          raw.on('error', () => {})
        }
        try {
          const limiter = new RateLimiter({
            store: new RedisStore(raw),
            prefix: uniquePrefix('cluster-boot'),
            limit: 3,
            window: WINDOW,
            timeoutMs: DEADLINE,
            onEvent: (e) => events.push(e),
          })
          const decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.consume('k')))
          expect(count(decisions, events)).toEqual({ allowed: 3, fallback: 0, errors: [] })
        } finally {
          try {
            if (kind === 'node-redis') raw.destroy()
            else raw.disconnect()
          } catch {}
        }
      },
      30_000,
    )
  })
})
