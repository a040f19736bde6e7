/**
 * The observability suite every adapter runs: the scripted sequence of {@link runObservabilityScript}
 * through the adapter, then the exact values of each metric, read from a prom-client registry fed by
 * `@tollgate/prometheus` and from the OpenTelemetry SDK's in-memory metric exporter fed by
 * `@tollgate/opentelemetry` (both subscribed at once, as in an app that runs both).
 * @module
 */
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { RedisStore } from '@tollgate/core'
import { instrumentTollgate } from '@tollgate/opentelemetry'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import { Registry } from 'prom-client'
import { createClient } from 'redis'
import { redisUrl } from './env'
import type { AppFactory } from './http-suite'
import { runObservabilityScript, SCRIPT_STATUSES } from './observability-script'
import { type RedisServerHandle, startRedisServer } from './redis-server'

type Labels = Record<string, string | number>

/**
 * Every sample of a prom-client metric as `label=value,...` -> value; histograms as `_count|labels` and
 * `_sum|labels` (buckets left out).
 */
export async function promSamples(registry: Registry, name: string): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric(name)
  if (!metric) throw new Error(`no metric ${name}`)
  const out: Record<string, number> = {}
  for (const v of (await metric.get()).values) {
    const metricName = (v as { metricName?: string }).metricName ?? name
    if (metricName.endsWith('_bucket')) continue
    const suffix = metricName === name ? '' : `${metricName.slice(name.length)}|`
    out[`${suffix}${labelKey(v.labels as Labels)}`] = v.value
  }
  return out
}

function labelKey(labels: Labels): string {
  return Object.keys(labels)
    .filter((k) => k !== 'le')
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',')
}

/** The OpenTelemetry side: a MeterProvider with an in-memory exporter (cumulative). */
export function otelMetrics() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
  const meterProvider = new MeterProvider({ readers: [reader] })
  return {
    meterProvider,
    /** Every data point of an instrument: `label=value,...` -> sum (counters), count (histograms) or value. */
    async samples(name: string): Promise<Record<string, number>> {
      exporter.reset()
      await reader.forceFlush()
      const out: Record<string, number> = {}
      for (const rm of exporter.getMetrics()) {
        for (const sm of rm.scopeMetrics) {
          for (const m of sm.metrics) {
            if (m.descriptor.name !== name) continue
            for (const dp of m.dataPoints) {
              const v = dp.value as number | { count: number }
              out[labelKey(dp.attributes as Labels)] = typeof v === 'number' ? v : v.count
            }
          }
        }
      }
      return out
    },
    shutdown: () => meterProvider.shutdown(),
  }
}

/**
 * Runs the observability suite against one adapter (its conformance factory).
 *
 * @example
 * describeObservability('express 5', expressFactory(express))
 */
export function describeObservability(adapter: string, factory: AppFactory): void {
  describe(`${adapter}: metrics after a scripted sequence`, () => {
    let client: ReturnType<typeof createClient>
    let dead: ReturnType<typeof createClient>
    let deadServer: RedisServerHandle
    const registry = new Registry()
    const otel = otelMetrics()
    let prom: ReturnType<typeof collectTollgateMetrics>
    let instrumentation: ReturnType<typeof instrumentTollgate>
    const tag = adapter.replace(/[^\w]+/g, '_')

    beforeAll(async () => {
      client = createClient({ url: redisUrl() })
      client.on('error', () => {})
      await client.connect()
      // A store whose Redis is gone: connected once, then its server killed (connection errors, fast).
      deadServer = await startRedisServer()
      dead = createClient({ url: deadServer.url, socket: { reconnectStrategy: () => 1000 } })
      dead.on('error', () => {})
      await dead.connect()
      // Built while connected: a client that has been ready fails fast while it reconnects.
      const deadStore = new RedisStore(dead)
      await deadServer.kill()
      for (let i = 0; i < 200 && dead.isReady; i++) await new Promise((r) => setTimeout(r, 10))
      prom = collectTollgateMetrics({ registry })
      instrumentation = instrumentTollgate({ meterProvider: otel.meterProvider })
      const statuses = await runObservabilityScript(factory, {
        store: new RedisStore(client),
        deadStore,
        tag,
      })
      expect(statuses).toEqual(SCRIPT_STATUSES)
    })
    afterAll(async () => {
      prom?.stop()
      instrumentation?.stop()
      await otel.shutdown()
      dead?.destroy()
      await client?.quit()
      await deadServer?.stop()
    })

    // The exact values both collectors must hold after the script (docs/observability.md names them).
    const decisions = {
      [`limiter=${tag}-api,outcome=allowed,policy=default,source=store`]: 2,
      [`limiter=${tag}-api,outcome=refused,policy=default,source=store`]: 1,
      [`limiter=${tag}-api,outcome=refused,policy=default,source=cache`]: 1,
      [`limiter=${tag}-shadow,outcome=allowed,policy=default,source=store`]: 1,
      [`limiter=${tag}-shadow,outcome=shadow_refused,policy=default,source=store`]: 1,
      [`limiter=${tag}-mw,outcome=allowed,policy=default,source=store`]: 1,
      [`limiter=${tag}-mw,outcome=shadow_refused,policy=default,source=store`]: 1,
      [`limiter=${tag}-down,outcome=refused,policy=default,source=fallback`]: 3,
    }
    const mine = (samples: Record<string, number>) =>
      Object.fromEntries(Object.entries(samples).filter(([k]) => k.includes(`limiter=${tag}-`)))

    it('decisions by limiter, policy, outcome and source', async () => {
      expect(mine(await promSamples(registry, 'tollgate_decisions_total'))).toEqual(decisions)
      expect(mine(await otel.samples('tollgate.decisions'))).toEqual(decisions)
    })

    it('failure-policy answers, store errors by kind, breaker state, deny-cache hits', async () => {
      const fallbacks = { [`failure_policy=deny,limiter=${tag}-down,outcome=refused`]: 3 }
      expect(mine(await promSamples(registry, 'tollgate_fallback_decisions_total'))).toEqual(fallbacks)
      expect(mine(await otel.samples('tollgate.fallback.decisions'))).toEqual(fallbacks)
      // Two calls reached the dead store; the third found the circuit open (no store call, no error).
      const errors = { [`kind=connection,limiter=${tag}-down`]: 2 }
      expect(mine(await promSamples(registry, 'tollgate_store_errors_total'))).toEqual(errors)
      expect(mine(await otel.samples('tollgate.store.errors'))).toEqual(errors)
      const breaker = { [`limiter=${tag}-down,scope=`]: 2 }
      expect(mine(await promSamples(registry, 'tollgate_breaker_state'))).toEqual(breaker)
      expect(mine(await otel.samples('tollgate.breaker.state'))).toEqual(breaker)
      const hits = { [`limiter=${tag}-api`]: 1 }
      expect(mine(await promSamples(registry, 'tollgate_deny_cache_hits_total'))).toEqual(hits)
      expect(mine(await otel.samples('tollgate.deny_cache.hits'))).toEqual(hits)
    })

    it('latency histograms count every decision and every store call', async () => {
      // api: 3 store calls (the 4th request was a deny-cache hit); shadow 2; mw 2; down: 2 failed calls.
      const storeCalls = {
        [`_count|limiter=${tag}-api,operation=consume`]: 3,
        [`_count|limiter=${tag}-shadow,operation=consume`]: 2,
        [`_count|limiter=${tag}-mw,operation=consume`]: 2,
        [`_count|limiter=${tag}-down,operation=consume`]: 2,
      }
      const counts = (samples: Record<string, number>) =>
        Object.fromEntries(Object.entries(mine(samples)).filter(([k]) => k.startsWith('_count|')))
      expect(counts(await promSamples(registry, 'tollgate_store_duration_seconds'))).toEqual(storeCalls)
      const otelStore = await otel.samples('tollgate.store.duration')
      expect(mine(otelStore)).toEqual(
        Object.fromEntries(Object.entries(storeCalls).map(([k, v]) => [k.replace('_count|', ''), v])),
      )
      const decided = {
        [`_count|limiter=${tag}-api,source=store`]: 3,
        [`_count|limiter=${tag}-api,source=cache`]: 1,
        [`_count|limiter=${tag}-shadow,source=store`]: 2,
        [`_count|limiter=${tag}-mw,source=store`]: 2,
        [`_count|limiter=${tag}-down,source=fallback`]: 3,
      }
      expect(counts(await promSamples(registry, 'tollgate_decision_duration_seconds'))).toEqual(decided)
    })
  })
}
