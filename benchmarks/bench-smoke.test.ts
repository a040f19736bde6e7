/**
 * Smoke test of the core benchmark: every variant's call runs through the benchmark's own measuring loop
 * for 200 ms and yields decisions (admitted or refused), never errors. No timing assertions: the machine
 * is shared, and `pnpm bench` is where numbers come from.
 */
import { clearOfBoundary } from '@tollgate/testkit'
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { measure } from './lib/measure'
import { allVariants, type Clients, makeOp, WINDOW_S } from './lib/variants'

const url = process.env.REDIS_URL
if (!url) {
  console.warn(
    'benchmarks/bench-smoke.test.ts skipped: REDIS_URL is not set (jest globalSetup from @tollgate/testkit sets it)',
  )
}
const suite = url ? describe : describe.skip

suite('core benchmark smoke (200 ms per variant)', () => {
  let nodeRedis: ReturnType<typeof createClient>
  let nodeRedisNt: ReturnType<typeof createClient>
  let ioredis: Redis
  let clients: Clients
  const run = `smoke-${Date.now().toString(36)}` // + the variant id: a fresh key space per run

  beforeAll(async () => {
    nodeRedis = createClient({ url })
    nodeRedis.on('error', () => {})
    await nodeRedis.connect()
    nodeRedisNt = createClient({ url, commandOptions: { timeout: 0 } })
    nodeRedisNt.on('error', () => {})
    await nodeRedisNt.connect()
    ioredis = new Redis(url as string)
    ioredis.on('error', () => {})
    clients = { 'node-redis': nodeRedis, 'node-redis-nt': nodeRedisNt, ioredis }
  })

  afterAll(async () => {
    await nodeRedis?.quit()
    await nodeRedisNt?.quit()
    await ioredis?.quit()
  })

  test.each(allVariants().map((v) => [v.id, v] as const))('%s', async (_id, v) => {
    // 64 in flight (not the benchmark's 256): keeps every call far below Tollgate's 500 ms store deadline
    // while other suites share the machine, so a fallback here means a real problem. A hot-refused run
    // makes at least 200 calls, however slow the machine, to go past its limit of 100, and no window
    // boundary falls inside it (an epoch-aligned fixed window starts a new count there).
    if (v.keys === 'hot-refused') await clearOfBoundary(WINDOW_S * 1000)
    const m = await measure(makeOp(v, clients, `${run}-${v.id}`), {
      concurrency: 64,
      durationMs: 200,
      minCalls: 200,
    })
    if (m.errors > 0) throw m.firstError
    expect(m.errors).toBe(0)
    expect(m.fallbacks).toBe(0)
    expect(m.decisions).toBeGreaterThan(0)
    expect(m.admitted + m.refused).toBe(m.decisions)
    expect(m.perSecond).toBeGreaterThan(0)
    if (v.keys === 'hot-refused') {
      // limit 100 on one fresh key, no window boundary inside the run: 100 admitted, the rest refused
      expect(m.decisions).toBeGreaterThanOrEqual(200)
      expect(m.admitted).toBe(100)
      expect(m.refused).toBeGreaterThan(0)
    } else {
      expect(m.admitted).toBe(m.decisions)
    }
  })
})
