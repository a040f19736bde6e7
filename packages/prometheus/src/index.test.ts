/**
 * @tollgate/prometheus: the text exposition, the wait() histogram, a multi-policy limiter's per-policy
 * counts, a custom prefix, and stop().
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { promSamples } from '@tollgate/testkit/observability-suite'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { Registry } from 'prom-client'
import { createClient } from 'redis'
import { collectTollgateMetrics } from './index'

describe('@tollgate/prometheus', () => {
  let client: ReturnType<typeof createClient>
  let store: RedisStore
  beforeAll(async () => {
    client = createClient({ url: redisUrl() })
    client.on('error', () => {})
    await client.connect()
    store = new RedisStore(client)
  })
  afterAll(async () => {
    await client.quit()
  })

  it('counts each policy of a multi-policy limiter by its own verdict, never by identity', async () => {
    const registry = new Registry()
    const metrics = collectTollgateMetrics({ registry })
    try {
      const login = new RateLimiter({
        store,
        name: 'login',
        prefix: uniquePrefix('pm'),
        policies: { ip: { limit: 3, window: '1m' }, account: { limit: 1, window: '1m', shadow: true } },
      })
      for (let i = 0; i < 4; i++) await login.consume({ ip: 'ip:9.9.9.9', account: 'email:x@y' })
      expect(await promSamples(registry, 'tollgate_decisions_total')).toEqual({
        'limiter=login,outcome=allowed,policy=ip,source=store': 3,
        'limiter=login,outcome=refused,policy=ip,source=store': 1,
        'limiter=login,outcome=allowed,policy=account,source=store': 1,
        'limiter=login,outcome=shadow_refused,policy=account,source=store': 3,
      })
      const text = await registry.metrics()
      expect(text).toContain('# TYPE tollgate_decisions_total counter')
      expect(text).toContain(
        'tollgate_decisions_total{limiter="login",policy="account",outcome="shadow_refused",source="store"} 3',
      )
      expect(text).not.toMatch(/9\.9\.9\.9|x@y/)
    } finally {
      metrics.stop()
    }
  })

  it('observes wait() time by outcome; a custom prefix; stop() unsubscribes and unregisters', async () => {
    const registry = new Registry()
    const metrics = collectTollgateMetrics({ registry, prefix: 'rl_' })
    const limiter = new RateLimiter({
      store,
      name: 'jobs',
      prefix: uniquePrefix('pw'),
      limit: 1,
      window: 300,
      // gcra, not an aligned window: a fixed window's boundary between the two calls would admit the
      // second at once, with a 0 s wait; here the second always waits about 300 ms (the window).
      algorithm: 'gcra',
    })
    await limiter.wait('job')
    await limiter.wait('job', { jitter: 0.5 })
    const waits = await promSamples(registry, 'rl_wait_duration_seconds')
    expect(waits['_count|limiter=jobs,outcome=admitted']).toBe(2)
    expect(waits['_sum|limiter=jobs,outcome=admitted']).toBeGreaterThan(0)
    metrics.stop()
    expect(registry.getSingleMetric('rl_wait_duration_seconds')).toBeUndefined()
    // A second collector on the same registry works after stop().
    const again = collectTollgateMetrics({ registry, prefix: 'rl_' })
    await limiter.consume('job2')
    expect(Object.values(await promSamples(registry, 'rl_decisions_total'))).toEqual([1])
    again.stop()
  })

  it('throws at construction where the core has no diagnostics channel (Node < 20.16), instead of counting nothing', async () => {
    // A child process: process.getBuiltinModule is deleted before the core loads (fixtures/no-channels.ts).
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(__dirname, '../test/fixtures/no-channels.ts')],
      { cwd: join(__dirname, '../../..'), timeout: 60_000 },
    )
    const { threw } = JSON.parse(stdout.trim().split('\n').pop()!)
    expect(threw).toMatch(/^@tollgate\/prometheus: @tollgate\/core cannot reach node:diagnostics_channel/)
    expect(threw).toMatch(/Node >= 20\.16 or >= 22\.3 is required/)
  })
})
