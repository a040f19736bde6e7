/**
 * @tollgate/opentelemetry against the OTel SDK's in-memory exporters: span attributes on the active span
 * for each decision, the wait() metric, and stop().
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { context } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { at, redisUrl, take } from '@tollgate/testkit'
import { otelMetrics } from '@tollgate/testkit/observability-suite'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { instrumentTollgate } from './index'

describe('@tollgate/opentelemetry', () => {
  let client: ReturnType<typeof createClient>
  let store: RedisStore
  const spans = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] })
  const contextManager = new AsyncLocalStorageContextManager().enable()

  beforeAll(async () => {
    context.setGlobalContextManager(contextManager)
    client = createClient({ url: redisUrl() })
    client.on('error', () => {})
    await client.connect()
    store = new RedisStore(client)
  })
  afterAll(async () => {
    context.disable()
    await tracerProvider.shutdown()
    await client.quit()
  })

  it('sets tollgate.* attributes on the active span of each decision (across the await)', async () => {
    const otel = otelMetrics()
    const inst = instrumentTollgate({ meterProvider: otel.meterProvider })
    try {
      const tracer = tracerProvider.getTracer('test')
      const limiter = new RateLimiter({
        store,
        name: 'login',
        prefix: uniquePrefix('otel'),
        policies: { ip: { limit: 1, window: '1m' }, account: { limit: 5, window: '1m', shadow: true } },
      })
      for (let i = 0; i < 2; i++) {
        await tracer.startActiveSpan(`request ${i}`, async (span) => {
          await limiter.consume({ ip: 'ip:1', account: 'email:a' })
          span.end()
        })
      }
      const [first, second] = take(spans.getFinishedSpans(), 2)
      expect(first.attributes).toEqual({
        'tollgate.limiter': 'login',
        'tollgate.allowed': true,
        'tollgate.source': 'store',
        'tollgate.policy': 'ip',
        'tollgate.limit': 1,
        'tollgate.remaining': 0,
        'tollgate.retry_after_ms': 0,
        'tollgate.shadow': [],
        'tollgate.refused_policies': [],
      })
      expect(second.attributes['tollgate.allowed']).toBe(false)
      expect(second.attributes['tollgate.refused_policies']).toEqual(['ip'])
      // No identity in any attribute.
      expect(JSON.stringify([first.attributes, second.attributes])).not.toMatch(/ip:1|email:a/)
      // Identities never become metric attributes either.
      const decisions = await otel.samples('tollgate.decisions')
      expect(Object.keys(decisions).join()).not.toMatch(/ip:1|email:a/)
      expect(decisions).toEqual({
        // The second call: 'ip' refused; 'account' (shadow) admitted by its own verdict, nothing spent.
        'limiter=login,outcome=allowed,policy=ip,source=store': 1,
        'limiter=login,outcome=refused,policy=ip,source=store': 1,
        'limiter=login,outcome=allowed,policy=account,source=store': 2,
      })
    } finally {
      inst.stop()
      await otel.shutdown()
    }
  })

  it('a shadow policy that refuses: the span names it in tollgate.shadow, the request is allowed', async () => {
    const otel = otelMetrics()
    const inst = instrumentTollgate({ meterProvider: otel.meterProvider })
    spans.reset()
    try {
      const tracer = tracerProvider.getTracer('test')
      const limiter = new RateLimiter({
        store,
        name: 'trial',
        prefix: uniquePrefix('otels'),
        policies: { ip: { limit: 2, window: '1m' }, account: { limit: 1, window: '1m', shadow: true } },
      })
      for (let i = 0; i < 3; i++) {
        await tracer.startActiveSpan(`request ${i}`, async (span) => {
          await limiter.consume({ ip: 'ip:7', account: 'email:s' })
          span.end()
        })
      }
      const [first, second, third] = take(
        spans.getFinishedSpans().map((s) => s.attributes),
        3,
      )
      expect([first['tollgate.allowed'], first['tollgate.shadow']]).toEqual([true, []])
      // The shadow policy refuses, the enforced one admits (its last unit): allowed, no enforced refusal, no
      // retry time, and the shadow refusal named. The numbers are the binding pair's: in a limiter mixing
      // enforced and shadow policies, the enforced one its clients are limited by (ip, 0 left of 2).
      expect(second).toEqual({
        'tollgate.limiter': 'trial',
        'tollgate.allowed': true,
        'tollgate.source': 'store',
        'tollgate.policy': 'ip',
        'tollgate.limit': 2,
        'tollgate.remaining': 0,
        'tollgate.retry_after_ms': 0,
        'tollgate.shadow': ['account'],
        'tollgate.refused_policies': [],
      })
      // Both refuse: only the enforced one is a refusal; the shadow one is still named.
      expect([
        third['tollgate.allowed'],
        third['tollgate.policy'],
        third['tollgate.shadow'],
        third['tollgate.refused_policies'],
      ]).toEqual([false, 'ip', ['account'], ['ip']])
      expect(JSON.stringify([first, second, third])).not.toMatch(/ip:7|email:s/)
      // A limiter whose every policy is in shadow: its numbers are the refusing policy's own.
      const all = new RateLimiter({
        store,
        name: 'trial-all',
        prefix: uniquePrefix('otela'),
        limit: 1,
        window: '1m',
        shadow: true,
      })
      for (let i = 0; i < 2; i++) {
        await tracer.startActiveSpan(`all ${i}`, async (span) => {
          await all.consume('ip:7')
          span.end()
        })
      }
      const allSecond = at(spans.getFinishedSpans(), 4).attributes
      expect(allSecond).toEqual({
        'tollgate.limiter': 'trial-all',
        'tollgate.allowed': true,
        'tollgate.source': 'store',
        'tollgate.policy': 'default',
        'tollgate.limit': 1,
        'tollgate.remaining': 0,
        'tollgate.retry_after_ms': 0,
        'tollgate.shadow': ['default'],
        'tollgate.refused_policies': [],
      })
      expect(await otel.samples('tollgate.decisions')).toEqual({
        'limiter=trial,outcome=allowed,policy=ip,source=store': 2,
        'limiter=trial,outcome=refused,policy=ip,source=store': 1,
        'limiter=trial,outcome=allowed,policy=account,source=store': 1,
        'limiter=trial,outcome=shadow_refused,policy=account,source=store': 2,
        'limiter=trial-all,outcome=allowed,policy=default,source=store': 1,
        'limiter=trial-all,outcome=shadow_refused,policy=default,source=store': 1,
      })
    } finally {
      inst.stop()
      await otel.shutdown()
    }
  })

  it('records the time wait() slept, by outcome; stop() unsubscribes', async () => {
    const otel = otelMetrics()
    const inst = instrumentTollgate({ meterProvider: otel.meterProvider, spanAttributes: false })
    const limiter = new RateLimiter({
      store,
      name: 'jobs',
      prefix: uniquePrefix('otelw'),
      limit: 1,
      window: 150,
      algorithm: 'fixed-window',
    })
    await limiter.wait('job')
    await limiter.wait('job')
    // cost 2 > limit 1: never admissible, so a timeout at once (no clock involved)
    await expect(limiter.wait('job', { cost: 2 })).rejects.toThrow()
    expect(await otel.samples('tollgate.wait.duration')).toEqual({
      'limiter=jobs,outcome=admitted': 2,
      'limiter=jobs,outcome=timeout': 1,
    })
    inst.stop()
    await limiter.wait('job', { maxWaitMs: 1000 })
    expect((await otel.samples('tollgate.wait.duration'))['limiter=jobs,outcome=admitted']).toBe(2)
    await otel.shutdown()
  })

  it('throws at construction where the core has no diagnostics channel (Node < 20.16), instead of recording nothing', async () => {
    // A child process: process.getBuiltinModule is deleted before the core loads (fixtures/no-channels.ts).
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(__dirname, '../test/fixtures/no-channels.ts')],
      { cwd: join(__dirname, '../../..'), timeout: 60_000 },
    )
    const { threw } = JSON.parse(stdout.trim().split('\n').pop()!)
    expect(threw).toMatch(/^@tollgate\/opentelemetry: @tollgate\/core cannot reach node:diagnostics_channel/)
    expect(threw).toMatch(/Node >= 20\.16 or >= 22\.3 is required/)
  })
})
