/**
 * `@tollgate/core/http`: the framework-neutral HTTP layer the adapters (`@tollgate/express`,
 * `@tollgate/fastify`, `@tollgate/hono`) are built on, and what an app answering by hand uses: the
 * RateLimit / Retry-After header values, the 429 / 503 problem bodies, the canonical client IP.
 * This file only re-exports, by name.
 * @module
 */

// Header values and problem bodies
export {
  type HeaderFormat,
  type PartitionKeyFn,
  type ProblemDetails,
  partitionKey,
  problemDetails,
  QUOTA_EXCEEDED_TYPE,
  type RateLimitHeaderOptions,
  rateLimitHeaders,
  retryAfterSeconds,
  TEMPORARY_REDUCED_CAPACITY_TYPE,
  unavailableProblem,
} from '../http/headers'
// The client IP
export { type CanonicalIpOptions, canonicalIp, DEFAULT_IPV6_SUBNET, forwardedAddress } from '../http/ip'
// Request handling shared by the adapters
export {
  checkHttpOptions,
  createHttpLimiter,
  type HttpLimiter,
  type HttpLimiterOptions,
  type HttpResult,
  type KeyInfo,
  PROBLEM_CONTENT_TYPE,
  type RequestFacts,
  routeOptions,
  warnPermissiveTrustProxy,
} from '../http/limiter'
// Option checks an adapter registers its own options with (one message style)
export { check, type OptionCheck, type OptionSchema } from '../options'
