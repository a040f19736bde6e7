/**
 * What a limiter reports. Two ways out, one naming scheme (`tollgate:<what>`):
 *
 * - the `onEvent` option and the channels `tollgate:store-error`, `tollgate:timeout`, `tollgate:breaker`,
 *   `tollgate:fallback`, `tollgate:cache-hit`, `tollgate:invalid-input` (for alerting);
 * - for metrics, on `node:diagnostics_channel` only: `tollgate:decision` (every consume / peek),
 *   `tollgate:wait` (every `wait()`), and the tracing channel `tollgate:store` (every store call:
 *   `tracing:tollgate:store:start|end|asyncStart|asyncEnd|error`).
 *
 * Nothing is built unless someone subscribes: each site checks `hasSubscribers` first. The module is
 * reached through `process.getBuiltinModule` (Node >= 20.16 / 22.3, what `engines` asks for). Where the
 * runtime has none (an older Node, an edge worker), the channels are undefined, nothing is published
 * ({@link CHANNELS_AVAILABLE} is false) and decisions are the same. No metrics library here:
 * `@tollgate/prometheus` and `@tollgate/opentelemetry` subscribe to these channels (and refuse to start
 * when {@link CHANNELS_AVAILABLE} is false). See docs/observability.md.
 * @module
 */
import { type InputError, StoreTimeoutError } from './errors'
import type { BreakerState } from './limiter/breaker'
import type { StoreFault } from './store-fault'
import type { Algorithm, Decision, StoreErrorPolicy } from './types'

/** Every event a limiter emits through `onEvent`. `limiter` is the limiter's `name`. */
export type TollgateEvent =
  | {
      type: 'store-error'
      limiter: string
      prefix: string
      error: unknown
      /** `'data'`: about one key's data, not counted by the breaker (see `storeFaultOf`). */
      fault: StoreFault
    }
  | { type: 'timeout'; limiter: string; prefix: string; timeoutMs: number }
  | { type: 'breaker'; limiter: string; prefix: string; state: BreakerState; scope?: string }
  | {
      type: 'fallback'
      limiter: string
      prefix: string
      policy: 'allow' | 'deny' | 'local'
      allowed: boolean
    }
  | { type: 'cache-hit'; limiter: string; prefix: string }
  /**
   * An adapter's `key`, `cost`, `limits` or `limiter` function answered a value the limiter refuses
   * (`undefined`, a number or an object for a key, a NaN cost...): a bug in the app, so the request is
   * answered 500 without details. `error.argument` names the function; `error.message` may quote the value.
   */
  | { type: 'invalid-input'; limiter: string; prefix: string; error: InputError }
  /**
   * A store's Redis server can evict Tollgate's counters (a `maxmemory-policy` other than `noeviction`,
   * with `maxmemory` set): an evicted counter admits its identity afresh. Sent by the store (no limiter
   * prefix), once per connection; logged once per client and policy as `WARN_TOLLGATE_EVICTION_POLICY`.
   */
  | { type: 'eviction-policy'; policy: string; maxmemory: number }
  /**
   * The store's client reported an error (its `'error'` event: a lost connection, a failed reconnect).
   * Sent by the store, which listens so that the event can never crash the process; the calls it affects
   * are answered by the failure policy.
   */
  | { type: 'connection-error'; error: unknown }
  /**
   * A consume reached Redis after the last moment its caller could still use it (a frozen server, a
   * slow network): the script changed nothing, and the caller, already answered by the failure policy
   * (or, rarely, still waiting and answered by it now), is never charged for it. Sent by the store.
   */
  | { type: 'expired-call' }

export type EventType = TollgateEvent['type']

/**
 * Published on `tollgate:decision` for every `consume()` and `peek()` answer, whatever its source.
 * The decision carries identities (`decision.policies[i].key`): a subscriber must never use them as
 * metric labels (unbounded cardinality, and personal data).
 */
export interface DecisionMessage {
  /** The limiter's `name`. */
  readonly limiter: string
  readonly prefix: string
  readonly operation: 'consume' | 'peek'
  /** The answer returned to the caller (`source`: 'store' | 'cache' | 'fallback' | 'reserve' | 'block' | 'allow'; `shadow` when set). */
  readonly decision: Decision
  /** The limiter's policy names (a failure-policy answer has no per-policy entries). */
  readonly policies: readonly string[]
  /**
   * The algorithm of each of the limiter's policies, parallel to `policies` (`algorithms[i]` is the
   * algorithm of `policies[i]`): a failure-policy answer has no `decision.policies[i].algorithm` to read.
   * Built once per limiter, the same array on every message.
   */
  readonly algorithms: readonly Algorithm[]
  /** The failure policy that answered, when `decision.source === 'fallback'`. */
  readonly failurePolicy: StoreErrorPolicy | undefined
  /** Time from the call to its answer, ms (store round trip, deny cache or fallback included). */
  readonly durationMs: number
}

/** Published on `tollgate:wait` once per `wait()` call, however it ended. */
export interface WaitMessage {
  readonly limiter: string
  readonly prefix: string
  /** 'admitted', 'timeout' (RateLimitTimeoutError: never or past maxWaitMs), 'aborted' (signal), 'error'. */
  readonly outcome: 'admitted' | 'timeout' | 'aborted' | 'error'
  /** Time spent sleeping, ms (store calls excluded). */
  readonly waitedMs: number
  /** How many decisions the wait took (1 = admitted at once). */
  readonly attempts: number
}

/** The kinds a store error is counted by (never the message: it can hold keys). */
export type StoreErrorKind = 'timeout' | 'connection' | 'server' | 'other'

/**
 * The context object of the `tollgate:store` tracing channel: the same object goes through `start`,
 * `end`, then `error` (on failure), `asyncStart` and `asyncEnd`, as with `tracingChannel.tracePromise`.
 */
export interface StoreCallContext {
  readonly limiter: string
  readonly prefix: string
  /**
   * `release` ends concurrency leases and `settle` makes a spend its actual cost (both the store's refund
   * script, reported apart from refunds); `control` writes or lists block and allow entries.
   */
  readonly operation: 'consume' | 'peek' | 'refund' | 'settle' | 'release' | 'reset' | 'control'
  /** (policy, key) pairs in the call. */
  readonly pairs: number
  /**
   * Calls sent to Redis in one script with this one, itself included: RedisStore batches the calls of
   * one event-loop turn (consume and peek report it; refunds and resets count as 1).
   */
  batchSize: number
  /** Set before `asyncStart`: the store call's own duration, ms (the limiter's deadline aside). */
  durationMs?: number
  /** Set before `error` on failure. */
  error?: unknown
  errorKind?: StoreErrorKind
}

/**
 * The channel names, for subscribers (`diagnostics_channel.subscribe(CHANNEL_NAMES.decision, fn)`).
 * `store` is a tracing channel: subscribe with `diagnostics_channel.tracingChannel(CHANNEL_NAMES.store)`.
 */
export const CHANNEL_NAMES = {
  decision: 'tollgate:decision',
  wait: 'tollgate:wait',
  store: 'tollgate:store',
  storeError: 'tollgate:store-error',
  timeout: 'tollgate:timeout',
  breaker: 'tollgate:breaker',
  fallback: 'tollgate:fallback',
  cacheHit: 'tollgate:cache-hit',
  invalidInput: 'tollgate:invalid-input',
} as const

interface Channel {
  readonly hasSubscribers: boolean
  publish(message: unknown): void
}

interface TracingChannel {
  readonly hasSubscribers?: boolean
  readonly start: Channel
  readonly end: Channel
  readonly asyncStart: Channel
  readonly asyncEnd: Channel
  readonly error: Channel
}

interface DiagnosticsChannel {
  channel(name: string): Channel
  tracingChannel?(name: string): TracingChannel
}

// Loaded without a static import so the core stays runtime-neutral (edge workers have no node: modules).
const dc = (() => {
  try {
    const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process
    return proc?.getBuiltinModule?.('node:diagnostics_channel') as DiagnosticsChannel | undefined
  } catch {
    return undefined
  }
})()

/** The event channels, by event type (undefined where the runtime has none). */
export const CHANNELS: Partial<Record<EventType, Channel>> = {}
if (dc) {
  for (const type of [
    'store-error',
    'timeout',
    'breaker',
    'fallback',
    'cache-hit',
    'invalid-input',
    'eviction-policy',
    'connection-error',
    'expired-call',
  ] as const) {
    CHANNELS[type] = dc.channel(`tollgate:${type}`)
  }
}

/** `tollgate:decision` (undefined where the runtime has no diagnostics_channel). */
export const DECISION_CHANNEL: Channel | undefined = dc?.channel(CHANNEL_NAMES.decision)
/**
 * Whether this runtime gave the core `node:diagnostics_channel` (through `process.getBuiltinModule`,
 * Node >= 20.16 / 22.3). When false, no channel message is ever published: decisions are unaffected, and
 * a subscriber would receive nothing (the collectors throw at construction instead of counting nothing).
 */
export const CHANNELS_AVAILABLE: boolean = DECISION_CHANNEL !== undefined
/** `tollgate:wait`. */
export const WAIT_CHANNEL: Channel | undefined = dc?.channel(CHANNEL_NAMES.wait)
/** The tracing channel `tollgate:store` (undefined without diagnostics_channel, or a runtime without `tracingChannel`). */
const STORE_CHANNEL: TracingChannel | undefined =
  typeof dc?.tracingChannel === 'function' ? dc.tracingChannel(CHANNEL_NAMES.store) : undefined

/** Whether anyone listens to the store tracing channel (`hasSubscribers` is missing before Node 20.13). */
export function storeTraced(): boolean {
  const tc = STORE_CHANNEL
  if (tc === undefined) return false
  const has = tc.hasSubscribers
  if (typeof has === 'boolean') return has
  return (
    tc.start.hasSubscribers ||
    tc.end.hasSubscribers ||
    tc.asyncStart.hasSubscribers ||
    tc.asyncEnd.hasSubscribers ||
    tc.error.hasSubscribers
  )
}

/**
 * Runs one store call through the tracing channel (call only when {@link storeTraced}): `start`, the call,
 * `end`; then, once it settles, `error` (failures), `asyncStart`, `asyncEnd`, with `durationMs` set.
 */
export function traceStore<T>(context: StoreCallContext, run: () => Promise<T>): Promise<T> {
  const tc = STORE_CHANNEL!
  const started = performance.now()
  tc.start.publish(context)
  let promise: Promise<T>
  try {
    promise = run()
  } catch (error) {
    context.error = error
    context.errorKind = storeErrorKind(error)
    tc.error.publish(context)
    throw error
  } finally {
    tc.end.publish(context)
  }
  return promise.then(
    (result) => {
      context.durationMs = performance.now() - started
      // A batching store says how many calls shared this one's script (consume and peek replies).
      const size = (result as { batchSize?: unknown } | null)?.batchSize
      if (typeof size === 'number') context.batchSize = size
      tc.asyncStart.publish(context)
      tc.asyncEnd.publish(context)
      return result
    },
    (error) => {
      context.durationMs = performance.now() - started
      context.error = error
      context.errorKind = storeErrorKind(error)
      tc.error.publish(context)
      tc.asyncStart.publish(context)
      tc.asyncEnd.publish(context)
      throw error
    },
  )
}

const CONNECTION =
  /ECONNREFUSED|ECONNRESET|EPIPE|ENOTFOUND|EHOSTUNREACH|ETIMEDOUT|socket|connection|reconnecting|closed|not connected|ClientClosed|Connection is closed/i

/**
 * How a store failure is counted: `timeout` (the limiter's deadline passed), `connection` (the client
 * could not reach Redis), `server` (Redis answered an error: OOM, READONLY, BUSY, CROSSSLOT...), `other`.
 *
 * @example
 * storeErrorKind(new Error('connect ECONNREFUSED 127.0.0.1:6390')) // 'connection'
 */
export function storeErrorKind(error: unknown): StoreErrorKind {
  if (error instanceof StoreTimeoutError) return 'timeout'
  const cause = (error as { cause?: unknown } | null)?.cause
  const message = String((error as { message?: unknown } | null)?.message ?? '')
  const causeMessage = String((cause as { message?: unknown } | null)?.message ?? '')
  const code = String((error as { code?: unknown } | null)?.code ?? (cause as { code?: unknown })?.code ?? '')
  if (CONNECTION.test(code) || CONNECTION.test(message) || CONNECTION.test(causeMessage)) return 'connection'
  if (/^[A-Z]{2,}[A-Z_]* /.test(causeMessage || message)) return 'server'
  return 'other'
}

/** Publishes an event to the hook and the channel; a throwing hook never breaks a decision. */
export function emit(hook: ((event: TollgateEvent) => void) | undefined, event: TollgateEvent): void {
  const channel = CHANNELS[event.type]
  if (channel?.hasSubscribers) channel.publish(event)
  if (hook) {
    try {
      hook(event)
    } catch {
      // the hook is the user's; a decision must not depend on it
    }
  }
}

/** A decision's outcome for one policy, as metrics count it. */
export type PolicyOutcome = 'allowed' | 'refused' | 'shadow_refused'

/**
 * Calls `fn` once per policy of a published decision with that policy's outcome: `refused` (it refused
 * and is enforced), `shadow_refused` (it refused in shadow mode, so it did not), `allowed` (it admitted).
 * A failure-policy answer without pairs (`allow` / `deny`) counts for every policy of the limiter.
 * Allocates nothing: collectors call it on every decision.
 *
 * @example
 * eachPolicyOutcome(message, (policy, outcome) => counter.inc({ limiter: message.limiter, policy, outcome }))
 */
export function eachPolicyOutcome(
  message: DecisionMessage,
  fn: (policy: string, outcome: PolicyOutcome) => void,
): void {
  const { decision } = message
  const shadow = decision.shadow
  const pairs = decision.policies
  if (pairs.length === 0) {
    const outcome: PolicyOutcome = shadow ? 'shadow_refused' : decision.allowed ? 'allowed' : 'refused'
    for (const policy of message.policies) fn(policy, outcome)
    return
  }
  for (const p of pairs) {
    fn(p.policy, p.allowed ? 'allowed' : shadow?.includes(p.policy) ? 'shadow_refused' : 'refused')
  }
}
