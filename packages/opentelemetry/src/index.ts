/**
 * `@tollgate/opentelemetry`: the same metrics as `@tollgate/prometheus`, as OpenTelemetry instruments,
 * plus attributes on the active span for each decision, fed by core's diagnostics channels. Needs only
 * `@opentelemetry/api`; the SDK and exporters are the application's. See docs/observability.md.
 * @module
 */
import dc from 'node:diagnostics_channel'
import { type Attributes, type MeterProvider, metrics, trace } from '@opentelemetry/api'
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

/** Options of {@link instrumentTollgate}. */
export interface TollgateInstrumentationOptions {
  /** Where the instruments come from. @default the global MeterProvider (`metrics.getMeterProvider()`) */
  meterProvider?: MeterProvider
  /** Set `tollgate.*` attributes on the active span for each decision. @default true */
  spanAttributes?: boolean
}

/** A running instrumentation. */
export interface TollgateInstrumentation {
  /** Unsubscribes from the channels (instruments stay with their meter). */
  stop(): void
}

const BREAKER = { closed: 0, 'half-open': 1, open: 2 } as const

/**
 * Thrown at construction where `@tollgate/core` has no diagnostics channels (no `process.getBuiltinModule`:
 * Node before 20.16 / 22.3): the core would publish nothing, so nothing would be recorded. Failing at startup
 * beats a dashboard that looks like no traffic.
 */
const NO_CHANNELS =
  '@tollgate/opentelemetry: @tollgate/core cannot reach node:diagnostics_channel on this runtime ' +
  '(process.getBuiltinModule is missing; Node >= 20.16 or >= 22.3 is required), so no decision would be recorded. ' +
  'Rate limiting itself works; upgrade Node or do not start the instrumentation.'

/**
 * Starts recording. Instruments (meter `@tollgate/opentelemetry`): `tollgate.decisions`,
 * `tollgate.decision.duration` (s), `tollgate.store.duration` (s), `tollgate.store.errors`,
 * `tollgate.fallback.decisions`, `tollgate.breaker.state`, `tollgate.deny_cache.hits`,
 * `tollgate.wait.duration` (s). Span attributes: `tollgate.limiter`, `tollgate.allowed`,
 * `tollgate.source`, `tollgate.policy`, `tollgate.limit`, `tollgate.remaining`, `tollgate.retry_after_ms`,
 * `tollgate.shadow`, `tollgate.refused_policies`.
 * Throws where `@tollgate/core` has no diagnostics channels (Node before 20.16 / 22.3: no
 * `process.getBuiltinModule`), rather than record nothing.
 *
 * @example
 * instrumentTollgate() // after the OTel SDK is started
 */
export function instrumentTollgate(options: TollgateInstrumentationOptions = {}): TollgateInstrumentation {
  if (!CHANNELS_AVAILABLE) throw new Error(NO_CHANNELS)
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter('@tollgate/opentelemetry')
  const spans = options.spanAttributes ?? true

  const decisions = meter.createCounter('tollgate.decisions', {
    description: 'Rate-limit decisions (consume), one per policy, by outcome and source.',
  })
  const decisionDuration = meter.createHistogram('tollgate.decision.duration', {
    description: 'Time from consume() to its answer.',
    unit: 's',
  })
  const storeDuration = meter.createHistogram('tollgate.store.duration', {
    description: 'Duration of store calls (one script round trip).',
    unit: 's',
  })
  const storeErrors = meter.createCounter('tollgate.store.errors', {
    description: 'Failed store calls by kind: timeout | connection | server | other.',
  })
  const fallbacks = meter.createCounter('tollgate.fallback.decisions', {
    description: 'Decisions the failure policy made instead of the store.',
  })
  const cacheHits = meter.createCounter('tollgate.deny_cache.hits', {
    description: 'Refusals answered from the local deny cache.',
  })
  const waitDuration = meter.createHistogram('tollgate.wait.duration', {
    description: 'Time wait() spent sleeping, per call.',
    unit: 's',
  })
  // Last known state per (limiter, scope), observed at each collection.
  const breakerStates = new Map<string, { attributes: Attributes; value: number }>()
  const breakerGauge = meter.createObservableGauge('tollgate.breaker.state', {
    description: 'Circuit breaker state: 0 closed, 1 half-open, 2 open.',
  })
  const observeBreakers = (result: { observe(value: number, attributes?: Attributes): void }) => {
    for (const { attributes, value } of breakerStates.values()) result.observe(value, attributes)
  }
  breakerGauge.addCallback(observeBreakers)

  // One frozen attribute object per label combination, not one per decision.
  const decisionAttributes = new LabelCache<Attributes>(([limiter, policy, outcome, source]) =>
    Object.freeze({ limiter, policy, outcome, source }),
  )
  const limiterSource = new LabelCache<Attributes>(([limiter, source]) => Object.freeze({ limiter, source }))
  const limiterOperation = new LabelCache<Attributes>(([limiter, operation]) =>
    Object.freeze({ limiter, operation }),
  )
  let current: DecisionMessage
  const countPolicy = (policy: string, outcome: string) =>
    decisions.add(1, decisionAttributes.get4(current.limiter, policy, outcome, current.decision.source))

  const onDecision = (m: unknown) => {
    const message = m as DecisionMessage
    if (message.operation !== 'consume') return
    const { limiter, decision } = message
    const { source } = decision
    current = message
    eachPolicyOutcome(message, countPolicy)
    decisionDuration.record(message.durationMs / 1000, limiterSource.get2(limiter, source))
    if (source === 'cache') cacheHits.add(1, { limiter })
    else if (source === 'fallback') {
      const outcome = decision.shadow ? 'shadow_refused' : decision.allowed ? 'allowed' : 'refused'
      fallbacks.add(1, { limiter, failure_policy: message.failurePolicy ?? 'unknown', outcome })
    }
    if (spans) {
      const span = trace.getActiveSpan()
      if (span?.isRecording()) {
        // The pair limit / remaining / retry_after_ms come from (none for a failure-policy answer).
        const binding = decision.binding >= 0 ? decision.policies[decision.binding] : undefined
        const refused = decision.policies.filter((p) => !p.allowed && !decision.shadow?.includes(p.policy))
        span.setAttributes({
          'tollgate.limiter': limiter,
          'tollgate.allowed': decision.allowed,
          'tollgate.source': source,
          'tollgate.policy': binding?.policy ?? '',
          'tollgate.limit': decision.limit,
          'tollgate.remaining': decision.remaining,
          'tollgate.retry_after_ms': Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : -1,
          'tollgate.shadow': decision.shadow ? [...decision.shadow] : [],
          'tollgate.refused_policies': refused.map((p) => p.policy),
        })
      }
    }
  }
  const onStoreEnd = (m: unknown) => {
    const ctx = m as StoreCallContext
    if (ctx.durationMs !== undefined)
      storeDuration.record(ctx.durationMs / 1000, limiterOperation.get2(ctx.limiter, ctx.operation))
  }
  const onStoreError = (m: unknown) => {
    const e = m as Extract<TollgateEvent, { type: 'store-error' }>
    storeErrors.add(1, { limiter: e.limiter, kind: storeErrorKind(e.error) })
  }
  const onTimeout = (m: unknown) => {
    storeErrors.add(1, {
      limiter: (m as Extract<TollgateEvent, { type: 'timeout' }>).limiter,
      kind: 'timeout',
    })
  }
  const onBreaker = (m: unknown) => {
    const e = m as Extract<TollgateEvent, { type: 'breaker' }>
    const scope = e.scope ?? ''
    breakerStates.set(`${e.limiter}\n${scope}`, {
      attributes: { limiter: e.limiter, scope },
      value: BREAKER[e.state],
    })
  }
  const onWait = (m: unknown) => {
    const w = m as WaitMessage
    waitDuration.record(w.waitedMs / 1000, { limiter: w.limiter, outcome: w.outcome })
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
  return {
    stop() {
      for (const [name, fn] of subscriptions) dc.unsubscribe(name, fn)
      breakerGauge.removeCallback(observeBreakers)
    },
  }
}
