/**
 * `@tollgate/fastify`: Tollgate as a Fastify plugin. Registered once, it limits every route (or only those
 * that opt in) through `config: { rateLimit }`; it only maps Fastify's request and reply onto the shared
 * HTTP layer of `@tollgate/core`, so it behaves exactly like the Express and Hono adapters.
 * @module
 */
import { ConfigError, type Decision, type KeyInput, MemoryStore, RateLimiter } from '@tollgate/core'
import {
  createHttpLimiter,
  type HttpLimiter,
  type HttpLimiterOptions,
  type KeyInfo,
  LIMITER_OPTION_NAMES,
  PROBLEM_CONTENT_TYPE,
  type RequestFacts,
  warnPermissiveTrustProxy,
} from '@tollgate/core/http'
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

export type { Decision } from '@tollgate/core'

/**
 * The request phase the limiter runs in. `'onRequest'` runs before the body is read, so a refused request
 * costs no parsing; `'preValidation'` and `'preHandler'` see `request.body` (and what auth hooks set).
 * @example
 * const hook: RateLimitHook = 'preHandler' // key on request.body.email
 */
export type RateLimitHook = 'onRequest' | 'preValidation' | 'preHandler'

/**
 * Answers a refused request (429) instead of the default `application/problem+json` body. The reply already
 * has status 429 and the RateLimit and Retry-After headers. Return the payload to send, or send it yourself
 * and `return reply`; `undefined` sends the default body.
 * @example
 * const onLimited: OnLimited = (request, reply, decision) => ({ error: 'slow down', retryInMs: decision.retryAfterMs })
 */
export type OnLimited = (request: FastifyRequest, reply: FastifyReply, decision: Decision) => unknown

/**
 * Options of one route's `config: { rateLimit }`, merged over the plugin's. A route that sets its own
 * `limit`/`window`/`policies` gets a limiter of its own on the plugin's store. The default key of a route
 * with its own options is `<ip> <route template>` (never the method: one budget whichever methods the route
 * answers), and a `key` function it inherits from the plugin is scoped the same way, so the route has a
 * budget of its own; a `key` the route sets is used as given.
 * @example
 * app.get('/search', { config: { rateLimit: { limit: 10, window: '1m' } } }, search)
 */
export interface TollgateRouteOptions extends HttpLimiterOptions<FastifyRequest> {
  /** When the limiter runs. @default 'onRequest' */
  hook?: RateLimitHook
  /** Custom 429 answer. @default an RFC 9457 problem (quota-exceeded) */
  onLimited?: OnLimited
}

/**
 * Plugin options: the limiter (or its options inline) and the defaults every route inherits.
 * @example
 * await app.register(tollgate, { limiter: new RateLimiter({ store, limit: 100, window: '1m' }) })
 */
export interface TollgateOptions extends TollgateRouteOptions {
  /** Limit every route; `false` limits only routes with `config: { rateLimit: { … } }`. @default true */
  global?: boolean
  /** Also limit requests that reach a not-found handler, on the app-wide budget. @default false */
  notFound?: boolean
}

const NAME = '@tollgate/fastify'
const ROUTE_ONLY = ['hook', 'onLimited']
const LIMITS = ['limit', 'window', 'algorithm', 'burst', 'policies'] as const
/** The `RateLimiter` options an adapter may take inline. */
const INLINE = LIMITER_OPTION_NAMES
const HOOKS: readonly unknown[] = ['onRequest', 'preValidation', 'preHandler']
type Options = TollgateRouteOptions & Record<string, unknown>
type Settle = (statusCode: number) => void

async function plugin(fastify: FastifyInstance, options: TollgateOptions): Promise<void> {
  if (typeof options !== 'object' || options === null)
    throw new ConfigError(`${NAME} options`, 'an object', options, 'type')
  const { global = true, notFound = false, ...base } = options as Options
  if (typeof global !== 'boolean') throw new ConfigError('global', 'true or false', global, 'type')
  if (typeof notFound !== 'boolean') throw new ConfigError('notFound', 'true or false', notFound, 'type')
  const known = [...ROUTE_ONLY, 'global', 'notFound']
  // Every plugin option is checked now; with `global: false` and no limiter, against a stand-in limiter.
  const appWide =
    global || notFound || base.limiter !== undefined || base.store !== undefined
      ? build(base, known)
      : undefined
  if (!appWide) build({ ...without(base, INLINE), limiter: standIn() }, known)
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined)
  if (fastifyOption(fastify, 'trustProxy') === true) warnPermissiveTrustProxy('Fastify trustProxy: true')

  const settles = new WeakMap<FastifyRequest, Settle>()
  const onResponse: onResponseHookHandler = (request, reply, done) => {
    settles.get(request)?.(reply.statusCode)
    done()
  }
  const handler = (http: HttpLimiter<FastifyRequest>, onLimited: OnLimited | undefined, route?: string) =>
    async function tollgate(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
      const result = await http.check(request, new Facts(request, route))
      if (result === undefined) return undefined
      request.rateLimit = result.decision
      reply.headers(result.headers)
      if (result.status === 200) {
        if (result.settle) settles.set(request, result.settle)
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
    opts: Options,
    template?: string,
  ) => {
    addHook(route, opts.hook ?? 'onRequest', handler(http, opts.onLimited, template))
    if (opts.skipFailedRequests || opts.skipSuccessfulRequests) addHook(route, 'onResponse', onResponse)
  }

  fastify.addHook('onRoute', (route) => {
    const own = route.config?.rateLimit
    if (own === false || (own === undefined && !global)) return
    if (own === undefined) return attach(route, appWide!, base)
    try {
      if (typeof own !== 'object' || own === null)
        throw new ConfigError('config.rateLimit', 'an object of options or false', own, 'type')
      // route.url is what request.routeOptions.url reports, read once here (that getter allocates per call).
      const opts = routeOptions(base, own as Options, route.url)
      attach(route, build(opts, ROUTE_ONLY), opts, route.url)
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
    if (base.skipFailedRequests || base.skipSuccessfulRequests) fastify.addHook('onResponse', onResponse)
  }
}

/** The request facts; `request.ip` (a getter walking trusted proxies) is read only if the key needs it. */
class Facts implements RequestFacts {
  // `declare`: plain assignments in the constructor, not class fields defined on every instance.
  declare private readonly request: FastifyRequest
  declare readonly route: string | undefined
  constructor(request: FastifyRequest, route: string | undefined) {
    this.request = request
    this.route = route
  }
  get ip(): string | undefined {
    return this.request.ip
  }
}

function build(opts: Options, known: string[]): HttpLimiter<FastifyRequest> {
  if (opts.hook !== undefined && !HOOKS.includes(opts.hook)) {
    throw new ConfigError('hook', "'onRequest', 'preValidation' or 'preHandler'", opts.hook, 'type')
  }
  return createHttpLimiter(opts, NAME, known)
}

/** The route's options over the plugin's; see {@link TollgateRouteOptions} for what is inherited. */
function routeOptions(base: Options, own: Options, template: string): Options {
  const merged: Options = { ...base, ...own }
  if (own.limiter !== undefined) {
    for (const name of INLINE) if (own[name] === undefined) delete merged[name]
  } else if (LIMITS.some((name) => own[name] !== undefined)) {
    // The route's own limits: a limiter of its own, on the plugin's store and prefix.
    const inherited = base.limiter instanceof RateLimiter ? base.limiter : undefined
    delete merged.limiter
    merged.store ??= inherited?.store
    merged.prefix ??= inherited?.prefix
    const other = own.policies !== undefined ? LIMITS.filter((name) => name !== 'policies') : ['policies']
    for (const name of other) if (own[name] === undefined) delete merged[name]
  }
  if (own.key === undefined && base.key !== undefined) merged.key = scoped(base.key, template)
  return merged
}

/** An inherited key, scoped to the route like the default key (empty keys stay empty: they are a 400). */
function scoped(key: NonNullable<TollgateRouteOptions['key']>, template: string) {
  const scope = ` ${template}`
  const one = (k: unknown) => (typeof k === 'string' && k !== '' ? k + scope : k) as string
  const scopeInput = (input: KeyInput): KeyInput => {
    if (typeof input !== 'object' || input === null) return one(input)
    return Object.fromEntries(Object.entries(input).map(([policy, k]) => [policy, one(k)]))
  }
  return (request: FastifyRequest, info: KeyInfo): KeyInput | Promise<KeyInput> => {
    const input = key(request, info)
    // A synchronous key stays synchronous (no await, no deadline entry in the core).
    return typeof (input as Partial<Promise<KeyInput>> | undefined)?.then === 'function'
      ? (input as Promise<KeyInput>).then(scopeInput)
      : scopeInput(input as KeyInput)
  }
}

function addHook(route: RouteOptions, name: string, hook: unknown): void {
  const hooks = route as unknown as Record<string, unknown>
  const existing = hooks[name]
  hooks[name] =
    existing === undefined ? [hook] : Array.isArray(existing) ? [...existing, hook] : [existing, hook]
}

function without(opts: Options, names: readonly string[]): Options {
  const out: Options = { ...opts }
  for (const name of names) delete out[name]
  return out
}

let placeholder: RateLimiter | undefined
function standIn(): RateLimiter {
  placeholder ??= new RateLimiter({ store: new MemoryStore(), limit: 1, window: 1000 })
  return placeholder
}

/** Fastify keeps its factory options (trustProxy among them) under a private symbol, not in initialConfig. */
function fastifyOption(instance: object, name: string): unknown {
  for (let o: object | null = instance; o !== null; o = Object.getPrototypeOf(o)) {
    const symbol = Object.getOwnPropertySymbols(o).find((s) => s.description === 'fastify.options')
    if (symbol) return (o as Record<symbol, Record<string, unknown> | undefined>)[symbol]?.[name]
  }
  return undefined
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
export const tollgate = fp(plugin, { fastify: '5.x', name: NAME })
export default tollgate
