/**
 * `@tollgate/nestjs`: exact, distributed rate limiting for NestJS (Express and Fastify platforms), as a
 * guard with decorators, and as a storage for `@nestjs/throttler`. This file only re-exports.
 * @module
 */

export type { Decision, KeyInput, StoreErrorPolicy } from '@tollgate/core'
export type { HeaderFormat } from '@tollgate/http'
export {
  RATE_LIMIT_OPTIONS,
  RateLimit,
  SKIP_RATE_LIMIT,
  SkipRateLimit,
  type TollgateOptions,
} from './decorators'
export { RateLimitException, TOLLGATE_OPTIONS, TollgateGuard, TollgateRoutes } from './guard'
export { TollgateModule, type TollgateModuleAsyncOptions } from './module'
export {
  StoreUnavailableException,
  type ThrottlerStorageRecord,
  TollgateThrottlerStorage,
  type TollgateThrottlerStorageOptions,
} from './storage'
