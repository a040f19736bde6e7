/**
 * `@tollgate/core`: exact, distributed rate limiting on Redis in one atomic round trip.
 * This file only re-exports.
 * @module
 */

export { ALGORITHM_CODES, ALGORITHMS } from './algorithms'
export type { ConcurrencyPolicyOptions } from './algorithms/concurrency'
export { parseDuration } from './duration'
export type { ErrorCode } from './errors'
// Errors, with stable codes
export {
  ConfigError,
  InputError,
  RateLimitError,
  RateLimitedError,
  RateLimitTimeoutError,
  StoreError,
  StoreTimeoutError,
} from './errors'
export type {
  DecisionMessage,
  EventType,
  PolicyOutcome,
  StoreCallContext,
  StoreErrorKind,
  TollgateEvent,
  WaitMessage,
} from './events'
export { CHANNEL_NAMES, eachPolicyOutcome, storeErrorKind } from './events'
export type { BreakerOptions, BreakerState } from './failure'
export { CircuitBreaker } from './failure'
// HTTP building blocks shared by the adapters (framework-free)
export * from './headers'
export * from './http'
export * from './ip'
// Building blocks for adapters and other-language workers
export { buildKey, identityTag, MAX_IDENTITY_BYTES } from './keys'
export { LabelCache } from './label-cache'
export type { Attempt, RateLimiterOptions, WaitOptions } from './limiter'
// The limiter
export { MAX_POLICIES, RateLimiter } from './limiter'
export type { CallLimits } from './limits'
export { MAX_CACHED_LIMITS } from './limits'
// Option checks adapters register their own options with (one message style)
export { check, type OptionCheck, type OptionSchema } from './options'
export { MAX_PENALTY_AFTER } from './penalty'
export * as scripts from './scripts/generated'
export type { BatchOption } from './stores/batcher'
export type { MemoryStoreOptions } from './stores/memory-store'
export { MemoryStore } from './stores/memory-store'
export type { ClientKind, RedisStoreOptions, ScriptClient } from './stores/redis-store'
// Stores
export { RedisStore } from './stores/redis-store'

export type {
  Algorithm,
  CallOptions,
  Decision,
  Duration,
  KeyInput,
  PenaltyOptions,
  PolicyDecision,
  PolicyOptions,
  ResolvedPolicy,
  Store,
  StoreEntry,
  StoreErrorPolicy,
  StoreReply,
  StoreResult,
} from './types'
