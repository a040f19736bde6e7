/**
 * The conformance-suite factory for Fastify: builds the app an `AppSpec` describes in plain Fastify idiom
 * (the plugin registered once; `spec.app` as its options, or `global: false`; route options as
 * `config: { rateLimit }`) and listens on a free loopback port.
 */
import tollgate, { type TollgateOptions, type TollgateRouteOptions } from '@tollgate/fastify'
import {
  adapterOptions,
  firstHeader,
  loopbackApp,
  nodeBody,
  RouteCalls,
  runRoute,
  trustedProxies,
} from '@tollgate/testkit/http-factory'
import type { AppFactory, AppSpec, SuiteOptions, SuiteRequest } from '@tollgate/testkit/http-suite'
import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify'

function view(request: FastifyRequest): SuiteRequest {
  return { header: (name) => firstHeader(request.headers, name), body: request.body, ip: request.ip }
}

/** Suite options to plugin options (the request functions get the suite's view of the request). */
function toFastifyOptions(options: SuiteOptions): TollgateRouteOptions {
  return adapterOptions(
    options,
    view,
    (reply: { statusCode: number }) => reply.statusCode,
  ) as TollgateRouteOptions
}

const ALL_METHODS_4 = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']

/** A Fastify factory function: Fastify 5's default export, or Fastify 4's (`fastify4`). */
export type FastifyConstructor = (options?: FastifyServerOptions) => FastifyInstance

/** The suite's factory for one Fastify major. */
export const fastifyFactoryOn =
  (make: FastifyConstructor): AppFactory =>
  async (spec: AppSpec) => {
    const app = make({ trustProxy: trustedProxies(spec.trustProxy) })
    const calls = new RouteCalls()
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
            await runRoute(route, calls)
            if (route.stream) return reply.code(200).type('text/plain').send(nodeBody(route.stream))
            return reply.code(route.status ?? 200).send({ ok: true, route: route.path })
          },
        })
      }
      await app.listen({ port: 0, host: '127.0.0.1' })
    } catch (error) {
      await app.close()
      throw error
    }
    return loopbackApp(app.server, calls, async () => {
      const closing = app.close()
      app.server.closeAllConnections()
      await closing
    })
  }

export const fastifyFactory: AppFactory = fastifyFactoryOn(Fastify as FastifyConstructor)
