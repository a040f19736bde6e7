/**
 * Concurrency limits across OS processes, against real Redis:
 * - exact: 4 children with warmed connections, released together, 50 simultaneous acquires each against
 *   `concurrency: 5`: exactly 5 admitted every round, and exactly 5 leases in Redis;
 * - never more than N in flight: the same children acquire (wait), count themselves on a Redis counter,
 *   work a few ms and release, many times over; no holder ever sees more than N in flight, none is lost;
 * - no leaked slot: a process that holds a slot and is SIGKILLed mid-request keeps it until its lease
 *   expires, and not a moment longer is needed: the slot is then free for everyone.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { at, findRepoRoot, type RaceHandle, redisUrl, startRace, take } from '@tollgate/testkit'
import { trackChild } from '@tollgate/testkit/cleanup'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { RateLimiter, RedisStore } from '../src'
import { buildKey, keySignature } from '../src/entries/scripts'
import { nodeRedis } from './clients'
import { KEY, LEASE_MS } from './fixtures/concurrency-race-module'

const MODULE = join(__dirname, 'fixtures/concurrency-race-module.ts')
const HOLDER = join(__dirname, 'fixtures/concurrency-holder.ts')
const LIMIT = 5 // the race module's
/** The race module's key of the hot identity under a prefix, as the limiter builds it. */
const leaseKey = (prefix: string) => buildKey(prefix, KEY, keySignature('concurrency', LEASE_MS))

describe('concurrency limits across processes', () => {
  let race: RaceHandle
  let client: Awaited<ReturnType<typeof nodeRedis>>
  beforeAll(async () => {
    client = await nodeRedis()
    race = await startRace({ workers: 4, module: MODULE, setupArgs: { url: redisUrl() } })
  })
  afterAll(async () => {
    await race?.close()
    await client?.quit()
  })

  it('exactly N admitted when 200 acquires race, and exactly N leases in Redis', async () => {
    const admitted: number[] = []
    const leases: number[] = []
    for (let round = 0; round < 10; round++) {
      const prefix = uniquePrefix('conc-race')
      const r = await race.round({ prefix, mode: 'hold' }, 50)
      expect(r.errors).toBe(0)
      admitted.push(r.admitted)
      leases.push(await client.zCard(leaseKey(prefix)))
    }
    console.log(`concurrency race: admitted per round ${admitted.join(',')}, leases ${leases.join(',')}`)
    expect(admitted).toEqual(new Array(10).fill(LIMIT))
    expect(leases).toEqual(new Array(10).fill(LIMIT))
  })

  it('never more than N in flight while 4 processes acquire, work and release', async () => {
    const prefix = uniquePrefix('conc-churn')
    const r = await race.round({ prefix, mode: 'churn' }, 25)
    if (r.errors > 0) console.log(r.errorSamples)
    expect(r.errors).toBe(0)
    expect(r.admitted).toBe(100) // every job ran, none lost
    expect(await client.get(`${prefix}:inflight-counter`)).toBe('0')
    expect(await client.exists(leaseKey(prefix))).toBe(0) // every lease released: nothing left
  })

  it('a process killed mid-request holds its slot until the lease expires, then the slot is free', async () => {
    const prefix = uniquePrefix('conc-kill')
    const leaseMs = 4000
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', HOLDER, redisUrl(), prefix, 'tenant:1', String(leaseMs)],
      { cwd: findRepoRoot(), stdio: ['ignore', 'pipe', 'inherit'] },
    )
    trackChild(child)
    const line = await new Promise<string>((resolve, reject) => {
      let out = ''
      child.stdout!.on('data', (chunk) => {
        out += chunk
        if (out.includes('\n')) resolve(out.trim())
      })
      child.once('exit', (code) => reject(new Error(`holder exited early (${code})`)))
    })
    expect(line).toBe('acquired')
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited

    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix,
      concurrency: 1,
      lease: leaseMs,
    })
    const key = at(limiter.keysFor('tenant:1'), 0)
    const [lease] = take(await client.zRangeWithScores(key, 0, -1), 1)
    expect(lease).toBeDefined() // the dead process's lease is still in Redis
    const refused = await limiter.consume('tenant:1')
    const [s, us] = await client.time()
    if (Number(s) * 1000 + Math.floor(Number(us) / 1000) < lease.score) {
      // still inside the lease (the machine was not slower than the lease): the slot is held
      expect(refused.allowed).toBe(false)
      expect(refused.retryAfterMs).toBeGreaterThan(0)
      expect(refused.retryAfterMs).toBeLessThanOrEqual(leaseMs)
    }
    // ... and frees itself once the lease has expired
    const admitted = await limiter.wait('tenant:1', { maxWaitMs: 2 * leaseMs, pollMs: 50 })
    expect(admitted.allowed).toBe(true)
    const after = await client.zRange(key, 0, -1)
    expect(after).toHaveLength(1)
    expect(after).not.toContain(lease.value)
    await limiter.release(admitted)
    expect(await client.exists(key)).toBe(0)
  })
})
