/**
 * `@tollgate/core/scripts`: the layer under `RateLimiter`, for workers in other languages, tools that
 * call the scripts themselves, and custom stores or clients: the generated Lua scripts with their SHA1s,
 * the algorithm codes the scripts take, the key builders, the most pairs a script is sent, and the types
 * of the store seam. docs/scripts.md is the contract. This file only re-exports, by name.
 * @module
 */

// What the scripts take: algorithm codes, keys, and the most pairs one call may name
export { ALGORITHM_CODES, ALGORITHMS, COMPACT_CODES } from '../algorithms'
export {
  buildKey,
  compactSecretKey,
  identityTag,
  keySignature,
  MAX_IDENTITY_BYTES,
  MAX_POLICIES,
} from '../keys'
// Limiters of a tool that reads what other limiters stored, outside their prefix check
export { withoutPrefixCheck } from '../registry'
// The scripts (generated from lua/ by scripts/gen-lua.mjs), each with its source and SHA1: the general
// ones, and each algorithm's own by its code in BY_ALGORITHM
export { BATCH, BY_ALGORITHM, CONSUME, PEEK, REFUND, RESET, type Script } from '../scripts/generated'
// Where storage: 'compact' keeps an identity's counters (tools that read them)
export { type CompactSpot, compactSpot, keptCompactSecret } from '../stores/redis/compact'
// The store seam: a client of your own for RedisStore, or a Store of your own
export type { ScriptClient } from '../stores/redis/script-client'
// The store seam's types, with ScriptClient above
export type { ResolvedPolicy, StoreEntry, StoreReply, StoreResult } from '../types'
