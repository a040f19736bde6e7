/**
 * `@tollgate/http`: the framework-neutral HTTP layer the adapters (`@tollgate/express`,
 * `@tollgate/fastify`, `@tollgate/hono`, `@tollgate/fetch`, `@tollgate/nestjs`) are built on, and what
 * an app answering by hand uses: the RateLimit / Retry-After header values, the 429 / 503 problem
 * bodies, the canonical client IP. This file only re-exports, by name: core's `test/surface.test.ts`
 * holds it to the list in the package README.
 * @module
 */

// Option checks an adapter registers its own options with (one message style)
export { check, type OptionCheck, type OptionSchema } from '@tollgate/core/internal'
// Header values and problem bodies
export {
  type HeaderFormat,
  type RateLimitHeaderOptions,
  rateLimitHeaders,
  retryAfterSeconds,
} from './headers'
// The client IP
export { type CanonicalIpOptions, canonicalIp, DEFAULT_IPV6_SUBNET, forwardedAddress } from './ip'
// Request handling shared by the adapters
export { createHttpLimiter, type HttpLimiter } from './limiter'
export { onBodyEnd } from './on-body-end'
export { checkHttpOptions, type HttpLimiterOptions, type KeyInfo } from './options'
export type { HttpResult } from './outcome'
export { type PartitionKeyFn, partitionKey } from './partition-key'
export {
  PROBLEM_CONTENT_TYPE,
  type ProblemDetails,
  problemDetails,
  QUOTA_EXCEEDED_TYPE,
  TEMPORARY_REDUCED_CAPACITY_TYPE,
  unavailableProblem,
} from './problem'
export { FrameworkFacts, type RequestFacts } from './request-facts'
export { routeOptions } from './route-options'
export { warnPermissiveTrustProxy } from './warnings'
