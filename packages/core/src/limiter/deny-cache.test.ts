/**
 * A reset must reach every process's deny cache: 4 processes burst against one identity (limit 5 per
 * minute, so every process caches the refusal for up to a minute), then the identity is reset by
 * another process, or its keys are wiped by FLUSHDB. After the cache's documented bound
 * (`denyCache.maxMs`, default 1000 ms) the next burst is admitted up to the limit again.
 */
import { join } from 'node:path'
import {
  type RaceHandle,
  type RedisServerHandle,
  sleepAtLeast as sleep,
  startRace,
  startRedisServer,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { RateLimiter, RedisStore } from '../index'

const MODULE = join(__dirname, '../../test/fixtures/deny-cache-race-module.ts')
const BOUND_MS = 1000 // the default denyCache.maxMs
const PER_WORKER = 50

describe('the deny cache across processes', () => {
  let server: RedisServerHandle
  let race: RaceHandle | undefined
  let client: ReturnType<typeof createClient>
  beforeAll(async () => {
    // Its own server: this test runs FLUSHDB.
    server = await startRedisServer()
    client = createClient({ url: server.url })
    client.on('error', () => {})
    await client.connect()
    race = await startRace({ workers: 4, module: MODULE, setupArgs: { url: server.url } })
  }, 60_000)
  afterAll(async () => {
    await race?.close()
    await client?.quit().catch(() => {})
    await server?.stop()
  })

  it('a cached refusal keeps its full retry time and the caller identity, without keeping the identity', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: uniquePrefix('deny-cache-one'),
      limit: 1,
      window: '1m',
    })
    const long = `user:${'x'.repeat(8192)}`
    await limiter.consume(long)
    const refused = await limiter.consume(long)
    const hit = await limiter.consume(long)
    expect(refused.source).toBe('store')
    expect(hit.source).toBe('cache')
    // The entry lives at most maxMs; the client is still told the store's retry time.
    expect(hit.retryAfterMs).toBeGreaterThan(BOUND_MS)
    expect(hit.retryAfterMs).toBeLessThanOrEqual(refused.retryAfterMs)
    expect(hit.policies[0]!.key).toBe(long)
  })

  it('a reset in another process, then a FLUSHDB: the next burst after the bound admits the limit', async () => {
    const prefix = uniquePrefix('deny-cache')
    const bursts: number[] = []
    const burst = async () => {
      const r = await race!.round({ prefix }, PER_WORKER)
      expect(r.errors).toBe(0)
      bursts.push(r.admitted)
    }
    await burst() // 5 admitted, every process has cached the refusal
    await burst() // refused, from the caches
    await new RateLimiter({ store: new RedisStore(client), prefix, limit: 5, window: '1m' }).reset(
      'locked-out-user',
    )
    await sleep(BOUND_MS + 100)
    await burst() // admitted again
    await client.flushDb()
    await sleep(BOUND_MS + 100)
    await burst() // admitted again
    console.log(
      `[deny-cache] admitted per burst of 4 x ${PER_WORKER}: ${bursts.join(', ')} (reset after the 2nd, FLUSHDB after the 3rd)`,
    )
    expect(bursts).toEqual([5, 0, 5, 5])
  }, 60_000)
})
