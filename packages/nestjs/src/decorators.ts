/**
 * `@RateLimit()` and `@SkipRateLimit()`: per controller or per handler, read by `TollgateGuard`.
 * @module
 */
import { SetMetadata } from '@nestjs/common'
import { checkHttpOptions, type HttpLimiterOptions } from '@tollgate/http'

/** Metadata key of `@RateLimit()` options. */
export const RATE_LIMIT_OPTIONS = 'tollgate:rate-limit'
/** Metadata key of `@SkipRateLimit()`. */
export const SKIP_RATE_LIMIT = 'tollgate:skip-rate-limit'

/**
 * Options of `TollgateModule.forRoot()` and `@RateLimit()`: the vocabulary every Tollgate adapter shares
 * (`limiter` or inline limiter options with `store`, `key`, `group`, `limits`, `cost`, `skip`, `headers`,
 * `legacyHeaders`, `skipFailedRequests`, `skipSuccessfulRequests`, `requestWasSuccessful`, `shadow`,
 * `ipv6Subnet`, `onStoreError`). Functions get the platform's request: Express's `Request` or Fastify's
 * `FastifyRequest` (and its `Response` / `FastifyReply` in `requestWasSuccessful`).
 * @example
 * const options: TollgateOptions<Request> = { limiter: api, key: (req, { ip }) => req.get('x-api-key') ?? ip() }
 */
export interface TollgateOptions<Req = any, Res = any> extends HttpLimiterOptions<Req, Res> {}

/**
 * Limits a controller (each of its routes) or a handler. The options go over the module's
 * (`TollgateModule.forRoot`): a `limiter` of its own replaces the module's; limits of its own
 * (`limit`/`window`, `policies`, `concurrency`) make a limiter of its own on the module's store and
 * prefix; anything else (`cost`, `key`, `skipFailedRequests`, ...) applies to the module's limiter. The
 * default key is the client IP plus the route template (`/users/:id`), whatever the method; `group` shares
 * one budget across the routes that name it. A handler's `@RateLimit()` replaces its controller's.
 *
 * Options are checked here, as the class is defined: a bad one throws `ConfigError`.
 *
 * @example
 * @Post('login')
 * @RateLimit({ limiter: login, key: (req, { ip }) => ({ ip: ip(), account: `email:${req.body.email}` }), skipSuccessfulRequests: true })
 * login(@Body() body: LoginDto) { ... }
 */
export function RateLimit(options: TollgateOptions): ClassDecorator & MethodDecorator {
  checkHttpOptions(options, {}, '@RateLimit() options')
  return SetMetadata(RATE_LIMIT_OPTIONS, options)
}

/**
 * Exempts a controller or a handler from every Tollgate limit (the module's and `@RateLimit()`'s): no
 * check, no headers.
 * @example
 * @Get('health')
 * @SkipRateLimit()
 * health() { return 'ok' }
 */
export function SkipRateLimit(): ClassDecorator & MethodDecorator {
  return SetMetadata(SKIP_RATE_LIMIT, true)
}
