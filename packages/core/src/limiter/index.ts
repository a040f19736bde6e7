/**
 * The limiter: `RateLimiter` and what it takes. See limiter.ts for the orchestration and the files
 * beside it for each concern.
 * @module
 */
export { MAX_POLICIES } from '../keys'
export { RateLimiter } from './limiter'
export { type Attempt, LIMITER_OPTIONS, type RateLimiterOptions, type WaitOptions } from './options'
