/**
 * `@tollgate/core/http`: the framework-neutral HTTP layer the adapters (`@tollgate/express`,
 * `@tollgate/fastify`, `@tollgate/hono`, `@tollgate/fetch`, `@tollgate/nestjs`) are built on, and what
 * an app answering by hand uses: the RateLimit / Retry-After header values, the 429 / 503 problem
 * bodies, the canonical client IP. This file only re-exports, by name.
 * @module
 */

// Header values and problem bodies
export {
  type HeaderFormat,
  type RateLimitHeaderOptions,
  rateLimitHeaders,
  retryAfterSeconds,
} from '../http/headers'
// The client IP
export { type CanonicalIpOptions, canonicalIp, DEFAULT_IPV6_SUBNET, forwardedAddress } from '../http/ip'
// Request handling shared by the adapters
export { createHttpLimiter, type HttpLimiter } from '../http/limiter'
export { checkHttpOptions, type HttpLimiterOptions, type KeyInfo } from '../http/options'
export type { HttpResult } from '../http/outcome'
export { type PartitionKeyFn, partitionKey } from '../http/partition-key'
export {
  PROBLEM_CONTENT_TYPE,
  type ProblemDetails,
  problemDetails,
  QUOTA_EXCEEDED_TYPE,
  TEMPORARY_REDUCED_CAPACITY_TYPE,
  unavailableProblem,
} from '../http/problem'
export { FrameworkFacts, type RequestFacts } from '../http/request-facts'
export { routeOptions } from '../http/route-options'
export { warnPermissiveTrustProxy } from '../http/warnings'
// Option checks an adapter registers its own options with (one message style)
export { check, type OptionCheck, type OptionSchema } from '../options'
