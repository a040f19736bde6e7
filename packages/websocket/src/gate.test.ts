/**
 * ConnectionGate on its own against the suite's redis-server: a lease is renewed while the connection
 * lives (also at the identity's limit) and ended once on close.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { ConnectionGate } from '@tollgate/websocket'
import { createClient } from 'redis'

let redis: ReturnType<typeof createClient>
let store: RedisStore
beforeAll(async () => {
  redis = createClient({ url: redisUrl() })
  redis.on('error', () => undefined)
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis.quit()
})

const prefix = () => `gate-${process.pid}-${Date.now().toString(36)}`
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('ConnectionGate', () => {
  it('renews the leases of open connections past the lease, at the limit, and frees them on close', async () => {
    const connections = new RateLimiter({
      store,
      prefix: prefix(),
      policies: { open: { concurrency: 2, lease: '2s' } },
    })
    const gate = new ConnectionGate({ connections })
    expect(gate.renewEveryMs).toBe(1000)
    const lost: unknown[] = []
    const a = await gate.open('u', (f) => lost.push(f))
    const b = await gate.open('u', (f) => lost.push(f))
    expect([a.allowed, b.allowed]).toEqual([true, true])
    // past the first leases' expiry: both still held by renewed leases
    await sleep(2300)
    expect(lost).toEqual([])
    expect((await connections.peek('u', { cost: 0 })).remaining).toBe(0)
    const third = await gate.open('u')
    expect(third.allowed).toBe(false)
    if (!a.allowed || !b.allowed) throw new Error('unreachable')
    await a.connection.close()
    await a.connection.close() // once only
    expect((await connections.peek('u', { cost: 0 })).remaining).toBe(1)
    await b.connection.close()
    expect((await connections.peek('u', { cost: 0 })).remaining).toBe(2)
  })
})
