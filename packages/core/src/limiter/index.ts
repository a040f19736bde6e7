/**
 * The limiter: `RateLimiter` and what it takes. limiter.ts builds the decision path (pipeline.ts) from
 * the stages its options configure (stage.ts: the reserve, the deny cache, penalties, shadow policies);
 * the files beside them hold each concern.
 * @module
 */
export { MAX_POLICIES } from '../keys'
export { RateLimiter } from './limiter'
export { type Attempt, LIMITER_OPTIONS, type RateLimiterOptions, type WaitOptions } from './options'
export type { TopEntry } from './top'
