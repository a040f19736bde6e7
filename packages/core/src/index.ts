/**
 * `@tollgate/core`: exact, distributed rate limiting on Redis in one atomic round trip.
 * This file only re-exports.
 * @module
 */

// The limiter
export { RateLimiter } from './limiter'
export type { RateLimiterOptions, WaitOptions, Attempt } from './limiter'

// Stores
export { RedisStore } from './stores/redis-store'
export type { ScriptClient, ClientKind } from './stores/redis-store'
export { MemoryStore } from './stores/memory-store'
export type { MemoryStoreOptions } from './stores/memory-store'

// Errors, with stable codes
export {
  RateLimitError,
  ConfigError,
  InputError,
  StoreError,
  StoreTimeoutError,
  RateLimitedError,
  RateLimitTimeoutError,
} from './errors'
export type { ErrorCode } from './errors'
export type { TollgateEvent, EventType } from './events'
export { CircuitBreaker } from './failure'
export type { BreakerOptions, BreakerState } from './failure'

// Building blocks for adapters and other-language workers
export { buildKey, identityTag, MAX_IDENTITY_BYTES } from './keys'
export { parseDuration } from './duration'
export { ALGORITHMS } from './algorithms'
export * as scripts from './scripts/generated'

// HTTP building blocks shared by the adapters (framework-free)
export * from './headers'
export * from './ip'
export * from './http'

export type {
  Algorithm,
  Duration,
  PolicyOptions,
  ResolvedPolicy,
  Decision,
  PolicyDecision,
  KeyInput,
  CallOptions,
  StoreErrorPolicy,
  Store,
  StoreEntry,
  StoreReply,
  StoreResult,
} from './types'
