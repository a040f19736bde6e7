/**
 * `TollgateGuard` and the per-route limiters it uses. The guard only maps Nest's execution context
 * (Express or Fastify underneath) onto the shared HTTP layer of `@tollgate/core` (`createHttpLimiter`).
 * @module
 */
import { type CanActivate, type ExecutionContext, HttpException, Inject, Injectable } from '@nestjs/common'
import type { DiscoveryService, Reflector } from '@nestjs/core'
import type { Decision } from '@tollgate/core'
import {
  createHttpLimiter,
  FrameworkFacts,
  type HttpLimiter,
  PROBLEM_CONTENT_TYPE,
  type ProblemDetails,
  routeOptions,
  warnPermissiveTrustProxy,
} from '@tollgate/http'
import { RATE_LIMIT_OPTIONS, SKIP_RATE_LIMIT, type TollgateOptions } from './decorators'

/** Injection token of the module's options (`{ options }`, `options` undefined for `forRoot()`). */
export const TOLLGATE_OPTIONS = 'tollgate:module-options'

/** Nest's route metadata keys (`@nestjs/common/constants`), read to find handlers and their paths. */
const PATH_METADATA = 'path'
const METHOD_METADATA = 'method'

/**
 * A refused request: 429 (over the limit), 503 (store down under `onStoreError: 'deny'`), 400 (input the
 * client caused, e.g. an unreadable forwarded address) or 500 (a `key` function answering a value the
 * limiter refuses, e.g. undefined: a bug in the app, logged once). The body is the problem document the other
 * Tollgate adapters send; the RateLimit headers, `Retry-After` and `Content-Type:
 * application/problem+json` are already set on the response. Catch it in an exception filter to answer
 * your way.
 * @example
 * @Catch(RateLimitException)
 * class Limited implements ExceptionFilter {
 *   catch(e: RateLimitException, host: ArgumentsHost) {
 *     host.switchToHttp().getResponse().status(e.getStatus()).json({ error: 'slow down', retryInMs: e.decision?.retryAfterMs })
 *   }
 * }
 */
export class RateLimitException extends HttpException {
  constructor(
    readonly problem: ProblemDetails,
    readonly decision: Decision | undefined,
  ) {
    super(problem, problem.status)
  }
}

/** A route's limiter; `routed`: its default key carries the route template. */
interface Route {
  readonly http: HttpLimiter<any>
  readonly routed: boolean
}
type Handler = (...args: unknown[]) => unknown

/**
 * The limiter of each (controller, handler): the module's, or the one its `@RateLimit()` options make.
 * Built when the app initialises (a bad option fails `app.init()` / `app.listen()` with `ConfigError`),
 * or on a handler's first request if discovery did not see it.
 */
export class TollgateRoutes {
  private readonly base: TollgateOptions | undefined
  private readonly app: Route | undefined
  private readonly routes = new WeakMap<object, Map<Handler, Route | null>>()

  constructor(
    config: { options?: TollgateOptions; http?: HttpLimiter<any> },
    private readonly reflector: Reflector,
    private readonly discovery: DiscoveryService,
  ) {
    this.base = config.options
    this.app = config.http && { http: config.http, routed: false }
  }

  onModuleInit(): void {
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype as unknown
      if (typeof controller !== 'function' || controller.prototype === undefined) continue
      for (const handler of handlers(controller.prototype, this.reflector)) this.route(controller, handler)
    }
  }

  /** The limiter of a handler, or null when nothing limits it. */
  route(controller: object, handler: Handler): Route | null {
    let byHandler = this.routes.get(controller)
    if (byHandler === undefined) {
      byHandler = new Map()
      this.routes.set(controller, byHandler)
    }
    let route = byHandler.get(handler)
    if (route === undefined) {
      route = this.build(controller, handler)
      byHandler.set(handler, route)
    }
    return route
  }

  private build(controller: object, handler: Handler): Route | null {
    const targets = [handler, controller as Handler]
    if (this.reflector.getAllAndOverride<boolean>(SKIP_RATE_LIMIT, targets)) return null
    const own = this.reflector.getAllAndOverride<TollgateOptions | undefined>(RATE_LIMIT_OPTIONS, targets)
    if (own === undefined) return this.app ?? null
    // The template scopes a key function inherited from the module to this route (the platform's own
    // template is what the default key carries, per request).
    const template = joinPaths(
      this.reflector.get(PATH_METADATA, controller as Handler),
      this.reflector.get(PATH_METADATA, handler),
    )
    const http = createHttpLimiter(routeOptions(this.base ?? {}, own, template))
    return { http, routed: http.needsRoute }
  }
}

/**
 * Rate-limits HTTP requests with Tollgate: the module's limiter (`TollgateModule.forRoot`) keyed on the
 * client IP, or a handler's or controller's `@RateLimit()`; nothing under `@SkipRateLimit()`. Sets the
 * RateLimit headers on every limited response; refuses with {@link RateLimitException} (429, 503, 400, 500)
 * before the handler runs; refunds after the response under `skipFailedRequests` /
 * `skipSuccessfulRequests`; ends concurrency leases when the response ends. The decision is on
 * `req.rateLimit`. Works on `@nestjs/platform-express` and `@nestjs/platform-fastify`; other contexts
 * (microservices, websockets) pass through.
 *
 * The client IP is the platform's `req.ip`: forwarded headers count only through its own trust-proxy
 * setting (Express `app.set('trust proxy', 1)`, Fastify `new FastifyAdapter({ trustProxy })`).
 *
 * @example
 * // every route of the app
 * providers: [{ provide: APP_GUARD, useClass: TollgateGuard }]
 * // or one controller
 * @UseGuards(TollgateGuard)
 * @Controller('search')
 * class SearchController {}
 */
export class TollgateGuard implements CanActivate {
  private trustChecked = false

  constructor(private readonly routes: TollgateRoutes) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true
    const route = this.routes.route(context.getClass(), context.getHandler() as Handler)
    if (route === null) return true
    const http = context.switchToHttp()
    const req = http.getRequest()
    const res = http.getResponse()
    // Fastify's request and reply wrap Node's; Express's are Node's.
    const fastify = req.raw !== undefined
    if (!this.trustChecked) {
      this.trustChecked = true
      if (!fastify && req.app?.get?.('trust proxy') === true)
        warnPermissiveTrustProxy("Express 'trust proxy' = true")
    }
    // `req.ip` walks the trusted proxies: the facts read it only when the key needs the address.
    const result = await route.http.check(
      req,
      new FrameworkFacts(req, route.routed ? routeTemplate(req, fastify) : undefined),
    )
    if (result === undefined) return true
    req.rateLimit = result.decision
    const headers = result.headers
    if (fastify) res.headers(headers)
    else for (const name in headers) res.setHeader(name, headers[name])
    if (result.status === 200) {
      const raw = fastify ? res.raw : res
      const settle = result.settle
      if (settle) raw.once('finish', () => settle(raw.statusCode, res))
      // 'close' comes after 'finish', and also when the client goes away first: leases end either way,
      // and the `settle` option gets the response then too, to read what was sent.
      const release = result.release
      if (release) raw.once('close', () => release(res))
      return true
    }
    if (fastify) res.header('content-type', PROBLEM_CONTENT_TYPE)
    else res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE)
    throw new RateLimitException(result.body!, result.decision)
  }
}

// Decorators applied as calls: the package needs no decorator compiler setting (nor reflect-metadata's
// parameter types) to build.
Injectable()(TollgateGuard)
Inject(TollgateRoutes)(TollgateGuard, undefined, 0)

/**
 * The matched route template (`/users/:id`, with the global prefix): Fastify's `routeOptions.url`;
 * Express's route path under its mount path (lower-cased: it holds the request's spelling).
 */
function routeTemplate(req: any, fastify: boolean): string | undefined {
  if (fastify) return req.routeOptions?.url
  const path = req.route?.path
  if (typeof path !== 'string') return undefined
  const base: string = req.baseUrl ?? ''
  return base === '' ? path : `${base.toLowerCase()}${path}`
}

/** The route handlers of a controller's prototype chain (methods with Nest's route metadata). */
function* handlers(prototype: object, reflector: Reflector): Generator<Handler> {
  const seen = new Set<string>()
  for (let p: object | null = prototype; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (name === 'constructor' || seen.has(name)) continue
      seen.add(name)
      const value = Object.getOwnPropertyDescriptor(p, name)?.value
      if (typeof value === 'function' && reflector.get(METHOD_METADATA, value) !== undefined)
        yield value as Handler
    }
  }
}

function joinPaths(...parts: unknown[]): string {
  const segments = parts
    .map((p) => (Array.isArray(p) ? p[0] : p))
    .filter((p): p is string => typeof p === 'string')
    .map((p) => p.replace(/^\/+|\/+$/g, ''))
    .filter((p) => p !== '')
  return `/${segments.join('/')}`
}
