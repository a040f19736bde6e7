/**
 * `@tollgate/express`: exact, distributed rate limiting for Express 4 and 5. This file only re-exports.
 * @module
 */

export type { Decision, KeyInput, StoreErrorPolicy } from '@tollgate/core'
export type { HeaderFormat } from '@tollgate/http'
export { type RateLimitMiddleware, rateLimit } from './rate-limit'
export type { OnLimited, RateLimitOptions } from './types'
