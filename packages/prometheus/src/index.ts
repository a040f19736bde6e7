/**
 * `@tollgate/prometheus`: prom-client metrics for every Tollgate limiter in the process, fed by core's
 * diagnostics channels (`tollgate:decision`, `tollgate:store`, `tollgate:wait`, `tollgate:breaker`,
 * `tollgate:store-error`, `tollgate:timeout`). Limiters need no option: give them a `name`.
 * Labels never hold an identity. See docs/observability.md for every metric.
 * @module
 */
import dc from 'node:diagnostics_channel'
import { CHANNEL_NAMES, type TollgateEvent } from '@tollgate/core'
import {
  CHANNELS_AVAILABLE,
  type DecisionMessage,
  eachPolicyOutcome,
  LabelCache,
  type StoreCallContext,
  storeErrorKind,
  type WaitMessage,
} from '@tollgate/core/observability'
import { Counter, Gauge, register as globalRegistry, Histogram, type Registry } from 'prom-client'

/** Options of {@link collectTollgateMetrics}. */
export interface TollgateMetricsOptions {
  /** Where the metrics are registered. @default prom-client's global `register` */
  registry?: Registry
  /** Prefix of every metric name. @default 'tollgate_' */
  prefix?: string
  /** Buckets of the decision and store-call latency histograms, seconds. @default 0.0001 s to 1 s */
  latencyBuckets?: number[]
  /** Buckets of the `wait()` time histogram, seconds. @default 1 ms to 60 s */
  waitBuckets?: number[]
}

/** A running collector. */
export interface TollgateMetrics {
  readonly registry: Registry
  /** Unsubscribes from the channels and removes the metrics from the registry. */
  stop(): void
}

const LATENCY = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
const WAIT = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
const BREAKER = { closed: 0, 'half-open': 1, open: 2 } as const

/**
 * Thrown at construction where `@tollgate/core` has no diagnostics channels (no `process.getBuiltinModule`:
 * Node before 20.16 / 22.3): the core would publish nothing, so nothing would be counted. Failing at startup
 * beats a dashboard that looks like no traffic.
 */
const NO_CHANNELS =
  '@tollgate/prometheus: @tollgate/core cannot reach node:diagnostics_channel on this runtime ' +
  '(process.getBuiltinModule is missing; Node >= 20.16 or >= 22.3 is required), so no decision would be counted. ' +
  'Rate limiting itself works; upgrade Node or do not start the collector.'

/**
 * Starts counting. Call once per process (a second call on the same registry throws, as prom-client
 * does for duplicate names).
 * Throws where `@tollgate/core` has no diagnostics channels (Node before 20.16 / 22.3: no
 * `process.getBuiltinModule`), rather than count nothing.
 *
 * @example
 * import { register } from 'prom-client'
 * collectTollgateMetrics()
 * app.get('/metrics', async (_req, res) => res.type(register.contentType).send(await register.metrics()))
 */
export function collectTollgateMetrics(options: TollgateMetricsOptions = {}): TollgateMetrics {
  if (!CHANNELS_AVAILABLE) throw new Error(NO_CHANNELS)
  const registry = options.registry ?? globalRegistry
  const p = options.prefix ?? 'tollgate_'
  const latencyBuckets = options.latencyBuckets ?? LATENCY
  const registers = [registry]

  const decisions = new Counter({
    name: `${p}decisions_total`,
    help: 'Rate-limit decisions (consume), one per policy: outcome allowed | refused | shadow_refused; source store | cache | fallback | reserve | block | allow.',
    labelNames: ['limiter', 'policy', 'outcome', 'source'] as const,
    registers,
  })
  const decisionSeconds = new Histogram({
    name: `${p}decision_duration_seconds`,
    help: 'Time from consume() to its answer, whatever answered (store, deny cache, failure policy).',
    labelNames: ['limiter', 'source'] as const,
    buckets: latencyBuckets,
    registers,
  })
  const storeSeconds = new Histogram({
    name: `${p}store_duration_seconds`,
    help: 'Duration of store calls (one script round trip), successful or not.',
    labelNames: ['limiter', 'operation'] as const,
    buckets: latencyBuckets,
    registers,
  })
  const storeErrors = new Counter({
    name: `${p}store_errors_total`,
    help: 'Failed store calls by kind: timeout | connection | server | other.',
    labelNames: ['limiter', 'kind'] as const,
    registers,
  })
  const fallbacks = new Counter({
    name: `${p}fallback_decisions_total`,
    help: 'Decisions the failure policy made instead of the store (store failed or circuit open).',
    labelNames: ['limiter', 'failure_policy', 'outcome'] as const,
    registers,
  })
  const breaker = new Gauge({
    name: `${p}breaker_state`,
    help: 'Circuit breaker state: 0 closed, 1 half-open, 2 open (scope: the cluster primary, or empty).',
    labelNames: ['limiter', 'scope'] as const,
    registers,
  })
  const cacheHits = new Counter({
    name: `${p}deny_cache_hits_total`,
    help: 'Refusals answered from the local deny cache without a store call.',
    labelNames: ['limiter'] as const,
    registers,
  })
  const waitSeconds = new Histogram({
    name: `${p}wait_duration_seconds`,
    help: 'Time wait() spent sleeping, per call: outcome admitted | timeout | aborted | error.',
    labelNames: ['limiter', 'outcome'] as const,
    buckets: options.waitBuckets ?? WAIT,
    registers,
  })

  // Bound children per label combination: prom-client would hash the label object on every call.
  const decisionChildren = new LabelCache(([limiter, policy, outcome, source]) =>
    decisions.labels({ limiter, policy, outcome, source }),
  )
  const decisionSecondsChildren = new LabelCache(([limiter, source]) =>
    decisionSeconds.labels({ limiter, source }),
  )
  const storeSecondsChildren = new LabelCache(([limiter, operation]) =>
    storeSeconds.labels({ limiter, operation }),
  )
  let current: DecisionMessage
  const countPolicy = (policy: string, outcome: string) =>
    decisionChildren.get4(current.limiter, policy, outcome, current.decision.source).inc()

  const onDecision = (m: unknown) => {
    const message = m as DecisionMessage
    if (message.operation !== 'consume') return
    const { limiter } = message
    const { source } = message.decision
    current = message
    eachPolicyOutcome(message, countPolicy)
    decisionSecondsChildren.get2(limiter, source).observe(message.durationMs / 1000)
    if (source === 'cache') cacheHits.inc({ limiter })
    else if (source === 'fallback') {
      const d = message.decision
      const outcome = d.shadow ? 'shadow_refused' : d.allowed ? 'allowed' : 'refused'
      fallbacks.inc({ limiter, failure_policy: message.failurePolicy ?? 'unknown', outcome })
    }
  }
  const onStoreEnd = (m: unknown) => {
    const ctx = m as StoreCallContext
    if (ctx.durationMs !== undefined)
      storeSecondsChildren.get2(ctx.limiter, ctx.operation).observe(ctx.durationMs / 1000)
  }
  const onStoreError = (m: unknown) => {
    const e = m as Extract<TollgateEvent, { type: 'store-error' }>
    storeErrors.inc({ limiter: e.limiter, kind: storeErrorKind(e.error) })
  }
  const onTimeout = (m: unknown) => {
    storeErrors.inc({ limiter: (m as Extract<TollgateEvent, { type: 'timeout' }>).limiter, kind: 'timeout' })
  }
  const onBreaker = (m: unknown) => {
    const e = m as Extract<TollgateEvent, { type: 'breaker' }>
    breaker.set({ limiter: e.limiter, scope: e.scope ?? '' }, BREAKER[e.state])
  }
  const onWait = (m: unknown) => {
    const w = m as WaitMessage
    waitSeconds.observe({ limiter: w.limiter, outcome: w.outcome }, w.waitedMs / 1000)
  }

  const subscriptions: Array<[string, (m: unknown) => void]> = [
    [CHANNEL_NAMES.decision, onDecision],
    [`tracing:${CHANNEL_NAMES.store}:asyncEnd`, onStoreEnd],
    [CHANNEL_NAMES.storeError, onStoreError],
    [CHANNEL_NAMES.timeout, onTimeout],
    [CHANNEL_NAMES.breaker, onBreaker],
    [CHANNEL_NAMES.wait, onWait],
  ]
  for (const [name, fn] of subscriptions) dc.subscribe(name, fn)
  const names = [
    'decisions_total',
    'decision_duration_seconds',
    'store_duration_seconds',
    'store_errors_total',
    'fallback_decisions_total',
    'breaker_state',
    'deny_cache_hits_total',
    'wait_duration_seconds',
  ].map((name) => `${p}${name}`)
  return {
    registry,
    stop() {
      for (const [name, fn] of subscriptions) dc.unsubscribe(name, fn)
      for (const name of names) registry.removeSingleMetric(name)
    },
  }
}
