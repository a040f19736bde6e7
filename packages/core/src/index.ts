/**
 * `@tollgate/core`: exact, distributed rate limiting on Redis in one atomic round trip.
 *
 * The main entry holds what an application uses: the limiter, the stores, the errors, the option and
 * result types, duration parsing and the diagnostics channel names. Building blocks live on subpaths:
 * `@tollgate/core/observability` (metric exporters), `@tollgate/core/scripts` (the Lua scripts, keys and
 * store seam, for other languages and custom stores) and `@tollgate/core/internal` (what `@tollgate/http`
 * shares with core). HTTP handling is in `@tollgate/http`. This file only re-exports, by name:
 * `test/surface.test.ts` holds every entry to the lists in the package README, so the surface cannot
 * grow unnoticed.
 * @module
 */

export type { ConcurrencyPolicyOptions } from './algorithms/concurrency'
export { parseDuration } from './duration'
// Errors, each with a stable `code`
export {
  ConfigError,
  type ErrorCode,
  InputError,
  RateLimitError,
  RateLimitedError,
  RateLimitTimeoutError,
  StoreError,
  StoreTimeoutError,
} from './errors'
// Observability: the diagnostics channel names, and what the `onEvent` option receives
export { CHANNEL_NAMES, type TollgateEvent } from './events'
// Keys, for tools that list or inspect what a limiter stored
export { keyPattern, parseKey } from './keys'
// The limiter
export { type Attempt, RateLimiter, type RateLimiterOptions, type WaitOptions } from './limiter'
// Stores
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store'
export { RedisStore, type RedisStoreOptions } from './stores/redis/store'
// Option, call and result types
export type {
  Algorithm,
  CallOptions,
  Decision,
  KeyInput,
  PolicyDecision,
  PolicyOptions,
  Store,
  StoreErrorPolicy,
} from './types'
