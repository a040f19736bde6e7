/**
 * `@tollgate/core/internal`: what Tollgate's own packages built on core (`@tollgate/http` and through it
 * the adapters) share with it: the option checks, the limiter's option names, the diagnostics emitter,
 * the key-scope registry and the hashing. Versioned with core and pinned to one exact core version by
 * those packages, so it carries no compatibility promise of its own: apps and third-party adapters use
 * `@tollgate/http`. This file only re-exports, by name.
 * @module
 */

// Events the HTTP layer emits on the limiter's channels and `onEvent` hook
export { CHANNELS, emit } from '../events'
// Hashing of partition keys
export { base64, sha256 } from '../hash'
// The limiter's own option names (inline limiter options) and what a decision spent
export { LIMITER_OPTIONS } from '../limiter'
export { spentFromStore } from '../limiter/spend'
// Per-call limits and costs as the limiter takes them
export type { CallLimits } from '../limits'
// Option checks, in the core's one message style
export { check, checkOptions, type OptionCheck, type OptionSchema, STORE_ERROR_POLICIES } from '../options'
// Per-route limiters' key scopes
export { inKeyScope, KEY_SCOPE } from '../registry'
export type { CallCost } from '../types'
