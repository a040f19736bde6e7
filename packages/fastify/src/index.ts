/**
 * `@tollgate/fastify`: Tollgate as a Fastify plugin. Registered once, it limits every route (or only those
 * that opt in) through `config: { rateLimit }`; it only maps Fastify's request and reply onto the shared
 * HTTP layer of `@tollgate/core`, so it behaves exactly like the Express and Hono adapters.
 * @module
 */
import { ConfigError } from '@tollgate/core'
import {
  check,
  checkHttpOptions,
  createHttpLimiter,
  FrameworkFacts,
  type HttpLimiter,
  type OptionSchema,
  PROBLEM_CONTENT_TYPE,
  routeOptions,
  warnPermissiveTrustProxy,
} from '@tollgate/http'
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onRequestHookHandler,
  onResponseHookHandler,
  RouteOptions,
} from 'fastify'
import fp from 'fastify-plugin'
import './augment'

import type { OnLimited, TollgateOptions, TollgateRouteOptions } from './types'

export type { Decision } from '@tollgate/core'
export type { OnLimited, RateLimitHook, TollgateOptions, TollgateRouteOptions } from './types'

const NAME = '@tollgate/fastify'
/** The options a route's `config.rateLimit` adds to the shared ones, with their checks. */
const ROUTE_OPTIONS: OptionSchema = {
  hook: check.oneOf(['onRequest', 'preValidation', 'preHandler']),
  onLimited: check.fn,
}
/** The plugin's options: a route's, plus two that only make sense app-wide. */
const PLUGIN_OPTIONS: OptionSchema = { ...ROUTE_OPTIONS, global: check.bool, notFound: check.bool }
type Settle = (statusCode: number, reply: FastifyReply) => void

async function plugin(fastify: FastifyInstance, options: TollgateOptions): Promise<void> {
  // Every plugin option is checked now, whether or not an app-wide limiter is built from them.
  const {
    global = true,
    notFound = false,
    ...base
  } = checkHttpOptions(options, PLUGIN_OPTIONS) as TollgateOptions
  const appWide =
    global || notFound || base.limiter !== undefined || base.store !== undefined
      ? createHttpLimiter(base, ROUTE_OPTIONS)
      : undefined
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined)

  let trustChecked = false
  // Route URLs and keys already warned about (Fastify adds a HEAD route beside each GET, same config).
  const misspelt = new Set<string>()
  const settles = new WeakMap<FastifyRequest, Settle>()
  const onResponse: onResponseHookHandler = (request, reply, done) => {
    settles.get(request)?.(reply.statusCode, reply)
    done()
  }
  const handler = (http: HttpLimiter<FastifyRequest>, onLimited: OnLimited | undefined, route?: string) =>
    async function tollgate(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
      if (!trustChecked) {
        // Read on the first request, as Express does: the trust setting is public only through request.ip.
        trustChecked = true
        if (trustsEveryHop(request)) warnPermissiveTrustProxy('Fastify trustProxy: true')
      }
      // `request.ip` (a getter walking trusted proxies) is read only if the key needs it.
      const result = await http.check(request, new FrameworkFacts(request, route))
      if (result === undefined) return undefined
      request.rateLimit = result.decision
      reply.headers(result.headers)
      if (result.status === 200) {
        if (result.settle) settles.set(request, result.settle)
        // Leases end, and the `settle` option settles, with the response however it ends: 'close' comes
        // after the response is sent, and when the client aborts or the connection breaks first
        // (onResponse settles first, if attached).
        const release = result.release
        if (release) reply.raw.once('close', () => release(reply))
        return undefined
      }
      reply.code(result.status)
      if (result.status === 429 && onLimited) {
        const payload = await onLimited(request, reply, result.decision!)
        if (payload === reply || reply.sent) return reply
        if (payload !== undefined) return reply.send(payload)
      }
      return reply.type(PROBLEM_CONTENT_TYPE).send(result.body)
    }
  const attach = (
    route: RouteOptions,
    http: HttpLimiter<FastifyRequest>,
    opts: TollgateRouteOptions,
    template?: string,
  ) => {
    addHook(route, opts.hook ?? 'onRequest', handler(http, opts.onLimited, template))
    if (opts.skipFailedRequests || opts.skipSuccessfulRequests || opts.settle)
      addHook(route, 'onResponse', onResponse)
  }

  fastify.addHook('onRoute', (route) => {
    const own = route.config?.rateLimit
    if (own === undefined) warnMisspelt(route, global, misspelt)
    if (own === false || (own === undefined && !global)) return
    if (own === undefined) return attach(route, appWide!, base)
    try {
      checkHttpOptions(own, ROUTE_OPTIONS, 'config.rateLimit')
      // route.url is what request.routeOptions.url reports, read once here (that getter allocates per call).
      const opts = routeOptions(base, own, route.url)
      attach(route, createHttpLimiter(opts, ROUTE_OPTIONS), opts, route.url)
    } catch (error) {
      // Fastify runs onRoute inside app.get()/app.route(): name the route, keep `option` as the core set it.
      if (error instanceof ConfigError) {
        const path = error.option === 'config.rateLimit' ? '' : 'config.rateLimit.'
        error.message = `${route.method} ${route.url}: ${path}${error.message}`
      }
      throw error
    }
  })

  if (notFound) {
    const limit = handler(appWide!, base.onLimited)
    const hook: onRequestHookHandler = (request, reply, done) => {
      if (!request.is404) return done()
      limit(request, reply).then((sent) => sent || done(), done)
    }
    fastify.addHook(base.hook ?? 'onRequest', hook as never)
    if (base.skipFailedRequests || base.skipSuccessfulRequests || base.settle)
      fastify.addHook('onResponse', onResponse)
  }
}

/**
 * Warns about a route `config` key that looks like a misspelt `rateLimit` (`rateLimt`, `ratelimit`,
 * `rate_limit`): the plugin never reads it, so the route silently keeps the app-wide limit (or none).
 */
function warnMisspelt(route: RouteOptions, global: boolean, warned: Set<string>): void {
  const config = route.config as Record<string, unknown> | undefined
  if (config === undefined || config === null || typeof config !== 'object') return
  for (const name of Object.keys(config)) {
    if (!looksLikeRateLimit(name)) continue
    const once = `${route.url}\n${name}`
    if (warned.has(once)) continue
    warned.add(once)
    console.warn(
      `[tollgate] WARN_TOLLGATE_ROUTE_CONFIG: ${route.method} ${route.url}: config.${name} is not read ` +
        `(did you mean config.rateLimit?); ${global ? 'the route gets the app-wide limit' : 'the route is not limited'}.`,
    )
  }
}

/** Whether a config key is `rateLimit` spelt another way: another case or separator, or two slips away. */
function looksLikeRateLimit(name: string): boolean {
  if (name === 'rateLimit' || name.length > 24) return false
  const bare = name.toLowerCase().replace(/[^a-z]/g, '')
  return bare.startsWith('ratelimit') || editDistance(bare, 'ratelimit') <= 2
}

/** Levenshtein distance (short strings only: route registration, never a request). */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const next = [i]
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    row = next
  }
  return row[b.length]!
}

function addHook(route: RouteOptions, name: string, hook: unknown): void {
  const hooks = route as unknown as Record<string, unknown>
  const existing = hooks[name]
  hooks[name] =
    existing === undefined ? [hook] : Array.isArray(existing) ? [...existing, hook] : [existing, hook]
}

/**
 * Whether Fastify's `trustProxy` trusts every hop (`true`). Fastify keeps the setting to itself; its
 * public `request.ip` getter applies it, so ask that getter about a chain of documentation addresses
 * (RFC 5737) that no real proxy list names: trusting them all means trusting anything.
 */
function trustsEveryHop(request: FastifyRequest): boolean {
  for (let o: object | null = request; o !== null; o = Object.getPrototypeOf(o)) {
    const get = Object.getOwnPropertyDescriptor(o, 'ip')?.get
    if (get === undefined) continue
    const headers = { 'x-forwarded-for': '198.51.100.1, 203.0.113.1, 203.0.113.2, 203.0.113.3' }
    const raw = {
      headers,
      socket: { remoteAddress: '192.0.2.1' },
      connection: { remoteAddress: '192.0.2.1' },
    }
    try {
      return get.call({ raw, headers, socket: raw.socket }) === '198.51.100.1'
    } catch {
      return false
    }
  }
  return false
}

/**
 * The plugin. Register it once, before the routes it limits (`await app.register(...)`, or declare the
 * routes in a plugin registered after it): Fastify runs `onRoute` only for routes added once it is loaded.
 * @example
 * import tollgate from '@tollgate/fastify'
 * await app.register(tollgate, { limiter: api })                                   // every route, keyed on IP
 * app.get('/search', { config: { rateLimit: { limit: 10, window: '1m' } } }, search) // stricter, per route
 * app.get('/health', { config: { rateLimit: false } }, health)                        // not limited
 */
export const tollgate = fp(plugin, { fastify: '4.x || 5.x', name: NAME })
export default tollgate
