/**
 * The conformance-suite factory for Fastify: builds the app an `AppSpec` describes in plain Fastify idiom
 * (the plugin registered once; `spec.app` as its options, or `global: false`; route options as
 * `config: { rateLimit }`) and listens on a free loopback port.
 */
import tollgate, { type TollgateOptions, type TollgateRouteOptions } from '@tollgate/fastify'
import type { AppFactory, AppSpec, SuiteOptions, SuiteRequest } from '@tollgate/testkit/http-suite'
import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify'

function view(request: FastifyRequest): SuiteRequest {
  return {
    header: (name) => {
      const value = request.headers[name.toLowerCase()]
      return Array.isArray(value) ? value[0] : value
    },
    body: request.body,
    ip: request.ip,
  }
}

/** Suite options to plugin options: only key/cost/skip functions are wrapped; the rest goes as is. */
function toFastifyOptions(options: SuiteOptions): TollgateRouteOptions {
  const out: Record<string, unknown> = { ...options }
  for (const name of ['key', 'cost', 'skip', 'limits'] as const) {
    const f = options[name]
    if (typeof f === 'function')
      out[name] = (request: FastifyRequest, info: unknown) =>
        (f as (r: SuiteRequest, i: unknown) => unknown)(view(request), info)
  }
  const successful = options.requestWasSuccessful
  if (typeof successful === 'function')
    out.requestWasSuccessful = (request: FastifyRequest, reply: { statusCode: number }) =>
      successful(view(request), { status: reply.statusCode })
  return out as TollgateRouteOptions
}

/**
 * The suite's "n trusted hops" in Fastify's idiom. Fastify 5.12 no longer honours a hop count (a number
 * trusts nothing: it cannot validate the immediate peer), so name the proxies: the suite's only peer is
 * 127.0.0.1, and the next n - 1 hops are whatever it forwarded.
 */
function trustedProxies(hops: AppSpec['trustProxy']): false | ((address: string, hop: number) => boolean) {
  if (!hops) return false
  return (address, hop) => hop < hops && (hop > 0 || address === '127.0.0.1')
}

const ALL_METHODS_4 = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']

/** A Fastify factory function: Fastify 5's default export, or Fastify 4's (`fastify4`). */
export type FastifyConstructor = (options?: FastifyServerOptions) => FastifyInstance

/** The suite's factory for one Fastify major. */
export const fastifyFactoryOn =
  (make: FastifyConstructor): AppFactory =>
  async (spec: AppSpec) => {
    const app = make({ trustProxy: trustedProxies(spec.trustProxy) })
    const counts = new Map<string, number>()
    try {
      await app.register(
        tollgate,
        spec.app ? (toFastifyOptions(spec.app) as TollgateOptions) : { global: false },
      )
      for (const route of spec.routes) {
        // Route-level limiters run in preHandler: after the body is parsed (the suite keys on it).
        const rateLimit =
          route.options === false
            ? false
            : route.options && { hook: 'preHandler' as const, ...toFastifyOptions(route.options) }
        app.route({
          // Fastify 4 has no `supportedMethods`: the methods its `app.all()` registers.
          method:
            route.method === 'ALL' ? (app.supportedMethods ?? ALL_METHODS_4) : (route.method as string[]),
          url: route.path,
          config: rateLimit === undefined ? {} : { rateLimit },
          handler: async (_request, reply) => {
            counts.set(route.path, (counts.get(route.path) ?? 0) + 1)
            if (route.hold) await route.hold()
            if (route.throws) throw new Error('handler failed')
            return reply.code(route.status ?? 200).send({ ok: true, route: route.path })
          },
        })
      }
      await app.listen({ port: 0, host: '127.0.0.1' })
    } catch (error) {
      await app.close()
      throw error
    }
    const address = app.server.address()
    if (address === null || typeof address === 'string') throw new Error('no TCP address')
    return {
      url: `http://127.0.0.1:${address.port}`,
      calls: (path) => counts.get(path) ?? 0,
      close: async () => {
        const closing = app.close()
        app.server.closeAllConnections()
        await closing
      },
    }
  }

export const fastifyFactory: AppFactory = fastifyFactoryOn(Fastify as FastifyConstructor)
