/**
 * What a `RateLimiter` takes: its options, those of `wait()`, what `attempt()` hands over, and the
 * schema that checks them at construction.
 * @module
 */
import type { ConcurrencyPolicyOptions } from '../algorithms/concurrency'
import type { CalendarWindow } from '../calendar'
import { ConfigError } from '../errors'
import type { TollgateEvent } from '../events'
import { check, checkOptions, type OptionCheck, STORE_ERROR_POLICIES } from '../options'
import type {
  Algorithm,
  CallOptions,
  Decision,
  Duration,
  PolicyOptions,
  Store,
  StoreErrorPolicy,
} from '../types'
import type { BreakerOptions } from './breaker'

/** Options of {@link RateLimiter}: either one policy inline, or named `policies`. */
export interface RateLimiterOptions {
  /** Where state lives: a `RedisStore` (shared by every process) or a `MemoryStore`. */
  store: Store
  /**
   * What metrics and events call this limiter (the `limiter` label). Letters, digits, `_ . : -`, up to
   * 64 characters; never an identity.
   * @default the prefix
   */
  name?: string
  /**
   * Shadow mode for every policy: decide, count and report "would have refused" (`decision.shadow`,
   * the `shadow_refused` outcome in metrics), but never refuse. A single policy can be in shadow with
   * `policies: { name: { ..., shadow: true } }`. See docs/observability.md#shadow-mode.
   * @default false
   */
  shadow?: boolean
  /**
   * First part of every key. Limiters that share a prefix and a policy name share state.
   * @default 'tollgate'
   */
  prefix?: string
  /** One policy: units per window. */
  limit?: number
  /** One policy: window length, or a calendar window (`{ calendar: 'month', timeZone }`). */
  window?: Duration | CalendarWindow
  /** One policy. @default 'sliding-window' */
  algorithm?: Algorithm
  /** One policy: capacity for token-bucket and gcra. @default limit */
  burst?: number
  /** One policy: block an identity it keeps refusing (see {@link PolicyOptions.penalty}). @default none */
  penalty?: PolicyOptions['penalty']
  /** One policy: units a process takes at a time for a hot key (see {@link PolicyOptions.reserve}). @default none */
  reserve?: number
  /**
   * One policy: most units in flight at once (a concurrency limit; see {@link ConcurrencyPolicyOptions}).
   * Release each admitted decision with `release()` (the adapters do it when the response ends).
   */
  concurrency?: number
  /** One concurrency policy: how long an unreleased slot stays taken. @default '60s' */
  lease?: Duration
  /**
   * Several policies, applied together. The names appear in keys and in the RateLimit headers. A policy
   * is a rate (`{ limit, window }`) or a concurrency limit (`{ concurrency, lease }`).
   */
  policies?: Record<string, PolicyOptions | ConcurrencyPolicyOptions>
  /**
   * Deadline of every store call, enforced by Tollgate whatever the client's own settings (its offline
   * queue included). A call past it has an unknown outcome and is never retried.
   * @default 500
   */
  timeoutMs?: number
  /**
   * What to do when the store fails or the breaker is open: `'allow'` (admit, no quota numbers),
   * `'deny'` (refuse; adapters answer 503), `'local'` (an in-process limiter with `localShare` of the quota).
   * Overridable per call and per route.
   * @default 'allow'
   */
  onStoreError?: StoreErrorPolicy
  /**
   * The share of each policy's quota the `'local'` fallback grants per process: set it to
   * 1 / (number of instances) so the fleet stays within the quota while the store is down.
   * @default 1
   */
  localShare?: number
  /**
   * How much the `'local'` fallback keeps (it is a `MemoryStore`, created at the first fallback). When
   * full it refuses identities it does not hold yet rather than forget a live counter, so a flood of
   * fresh identities cannot buy an identity at its limit a new quota. See docs/failure-modes.md.
   * @default { maxKeys: 10000, maxBytes: 4194304 }
   */
  localCapacity?: { maxKeys?: number; maxBytes?: number }
  /** Circuit breaker. @default { failures: 3, cooldownMs: 1000 } */
  breaker?: BreakerOptions
  /**
   * Remember refusals in-process, so hammering a closed gate costs no round trip: until their retry time,
   * but at most `maxMs`, so a `reset()` in another process (or keys deleted in Redis) is seen everywhere
   * within `maxMs`. Bounded by `maxEntries` and `maxBytes` (the oldest go first). `false` turns it off.
   * @default { maxEntries: 10000, maxBytes: 4194304, maxMs: 1000 }
   */
  denyCache?: false | { maxEntries?: number; maxBytes?: number; maxMs?: number }
  /**
   * Count the identities each policy refuses, for {@link RateLimiter.top}: refusals are tallied in
   * process and added about once a second, in one script per policy, to a sorted set in the store capped
   * at `maxIdentities` members (the most refused), one per period (the policy's window, at least a
   * second) living two periods. Admitted calls write nothing. `false` turns it off.
   * @default { maxIdentities: 1000 }
   */
  top?: false | { maxIdentities?: number }
  /** Receives store errors, timeouts, breaker changes, fallback decisions and cache hits. */
  onEvent?: (event: TollgateEvent) => void
}

/** Options of {@link RateLimiter.wait}. */
export interface WaitOptions extends CallOptions {
  /**
   * Longest total time to wait. A wait that would pass it throws `RateLimitTimeoutError` at once,
   * without sleeping.
   * @default 60000
   */
  maxWaitMs?: number
  /** Aborts the wait (rejects with the signal's reason). */
  signal?: AbortSignal
  /**
   * While only concurrency policies refuse, how often to try again: a slot frees when its holder
   * releases it, which no retry time predicts (their `retryAfterMs` is when a lease expires at the latest).
   * @default 100
   */
  pollMs?: number
  /**
   * Spreads retries of many waiters refused together: each sleep is `retryAfterMs` plus a random extra of
   * up to `jitter` x `retryAfterMs` (never less than `retryAfterMs`, which would only be refused again;
   * never past `maxWaitMs`). A number in [0, 1].
   * @default 0
   */
  jitter?: number
}

/** What `attempt()` hands to its callback. */
export interface Attempt {
  readonly decision: Decision
  /** Gives the spend back (e.g. the login succeeded). Awaited before `attempt()` resolves. */
  refund(): Promise<void>
}

export const MIB = 1024 * 1024
const NAME = /^[\w.:-]{1,64}$/

/**
 * Every option of {@link RateLimiterOptions} with its check (options.ts). The HTTP layer checks inline
 * limiter options with the same schema, so a mistake reads the same from the core and every adapter.
 * `prefix` and the policy options are checked where they are parsed (keys.ts, algorithms).
 */
export const LIMITER_OPTIONS = {
  store(value, option) {
    const s = value as Partial<Store> | null
    if (
      typeof s !== 'object' ||
      s === null ||
      typeof s.consume !== 'function' ||
      typeof s.refund !== 'function'
    )
      throw new ConfigError(option, 'a Store (new RedisStore(client) or new MemoryStore())', value, 'type')
  },
  name(value, option) {
    if (typeof value !== 'string' || !NAME.test(value))
      throw new ConfigError(option, 'letters, digits, _ . : - (1 to 64 characters)', value, 'type')
  },
  shadow: check.bool,
  prefix: check.any,
  limit: check.any,
  window: check.any,
  algorithm: check.any,
  burst: check.any,
  penalty: check.any,
  reserve: check.any,
  concurrency: check.any,
  lease: check.any,
  policies: check.any,
  timeoutMs: check.positiveMs,
  onStoreError: check.oneOf(STORE_ERROR_POLICIES),
  localShare(value, option) {
    if (typeof value !== 'number' || !(value > 0 && value <= 1))
      throw new ConfigError(option, 'a number in (0, 1]: 1 / the number of instances', value)
  },
  localCapacity: check.nested({ maxKeys: check.positiveInt, maxBytes: check.positiveInt }),
  breaker: check.nested({ failures: check.positiveInt, cooldownMs: check.positiveMs }),
  denyCache(value, option) {
    if (value === false) return
    if (typeof value !== 'object' || value === null)
      throw new ConfigError(option, 'false or { maxEntries, maxBytes, maxMs }', value, 'type')
    checkOptions(
      value,
      { maxEntries: check.positiveInt, maxBytes: check.positiveInt, maxMs: positiveOrInfiniteMs },
      option,
      `${option}.`,
    )
  },
  top(value, option) {
    if (value === false) return
    if (typeof value !== 'object' || value === null)
      throw new ConfigError(option, 'false or { maxIdentities }', value, 'type')
    checkOptions(value, { maxIdentities: maxIdentities }, option, `${option}.`)
  },
  onEvent: check.fn,
} as const satisfies Record<keyof RateLimiterOptions, OptionCheck>

/** The most members a top set may keep: a bound on its memory in the store. */
export const MAX_TOP_IDENTITIES = 10_000

function maxIdentities(value: unknown, option: string): void {
  check.positiveInt(value, option, MAX_TOP_IDENTITIES)
}

function positiveOrInfiniteMs(value: unknown, option: string): void {
  check.positiveMs(value, option, true)
}
