/**
 * @tollgate/opentelemetry against the OTel SDK's in-memory exporters: span attributes on the active span
 * for each decision, the wait() metric, and stop().
 */
import { context } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { redisUrl } from '../../testkit/src/env'
import { otelMetrics } from '../../testkit/src/observability-suite'
import { uniquePrefix } from '../../testkit/src/store-suite'
import { instrumentTollgate } from '../src'

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
      const [first, second] = spans.getFinishedSpans()
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
})
