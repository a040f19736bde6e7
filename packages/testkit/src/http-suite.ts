/**
 * The HTTP conformance suite every adapter runs (Express, Fastify, Hono): one set of behaviours,
 * checked over real HTTP against real Redis, framework-free. Each concern is a file of http-suite/;
 * this entry composes them, so every adapter runs every case.
 *
 * ## Contract for adapters
 *
 * ```ts
 * import { describeHttpAdapter } from '@tollgate/testkit/http-suite'
 * describeHttpAdapter('fastify 5', async (spec) => { ...build, listen on 127.0.0.1:0...; return running })
 * ```
 *
 * The suite calls the {@link AppFactory} once per test with an {@link AppSpec}; the factory builds an app
 * in its framework's own idiom and starts it listening on a free loopback port:
 *
 * - `spec.trustProxy`: `false` (default) = the client address is the socket peer only; a number = that
 *   many trusted proxy hops, mapped onto the framework's own setting (Express `trust proxy`, Fastify
 *   `trustProxy`, Hono's `getConnInfo` + its explicit option). The suite only sends from 127.0.0.1.
 * - `spec.app`: app-wide limiter options, mounted before every route (default key: client IP).
 * - `spec.routes`: each route answers `status` (default 200) with a small JSON body, counts its handler
 *   invocations (`running.calls(route.path)`), and, when `options` is set, has a route-level limiter in
 *   front of the handler (default key: client IP + route template, whatever the method). `options: false` exempts the
 *   route from the app-wide limiter (Express/Hono: register it before the app-wide middleware; Fastify:
 *   `config: { rateLimit: false }`).
 * - GET routes also answer HEAD (what every framework does by default).
 * - POST bodies are JSON; a route-level limiter must run after the body is parsed (`req.body` in the
 *   neutral view). App-wide limiters may see `body: undefined`.
 * - Options are passed through UNCHANGED except `key`, `cost`, `skip` and `limits` functions, which receive the
 *   framework's request: the factory wraps them as `(req) => options.key(view(req))` with a
 *   {@link SuiteRequest} view. Unknown or ill-typed properties must reach the adapter as they are: the
 *   suite sends bad options on purpose and expects the factory's promise to REJECT with the adapter's
 *   `ConfigError` (code `ERR_TOLLGATE_CONFIG`), leaving nothing listening.
 * - `spec.routes[i].stream`: the handler answers 200 with that body, streamed (`nodeBody` / `webBody` of
 *   http-factory.ts), produced as the client reads it.
 * - `running.close()` must also end keep-alive connections (e.g. `server.closeAllConnections()`).
 *
 * Every test builds its limiters with a fresh prefix on one shared node-redis client (closed in
 * `afterAll`), so tests never see each other's state (http-suite/context.ts).
 * @module
 */

import { describeClientIp } from './http-suite/client-ip'
import { describeConcurrency } from './http-suite/concurrency'
import { suiteContext } from './http-suite/context'
import { describeLimitsAndHeaders } from './http-suite/headers'
import { describeKeySkipCost } from './http-suite/key-skip-cost'
import { describeOptions } from './http-suite/options'
import { describeRefundsAndShadow } from './http-suite/refunds-and-shadow'
import { describeRoutes } from './http-suite/routes'
import { describeStoreFailure } from './http-suite/store-failure'
import { describeStreaming } from './http-suite/streaming'
import type { AppFactory } from './http-suite/types'

export { request } from './http-suite/request'
export type {
  AppFactory,
  AppSpec,
  RunningApp,
  SuiteOptions,
  SuiteOutcome,
  SuiteRequest,
  SuiteResponse,
  SuiteRoute,
  SuiteStream,
} from './http-suite/types'

/** Runs the conformance suite for one adapter. */
export function describeHttpAdapter(name: string, factory: AppFactory): void {
  describe(`HTTP conformance: ${name}`, () => {
    const context = suiteContext(factory)
    describeLimitsAndHeaders(context)
    describeRoutes(context)
    describeClientIp(context)
    describeKeySkipCost(context)
    describeRefundsAndShadow(context)
    describeConcurrency(context)
    describeStreaming(context)
    describeOptions(context)
    describeStoreFailure(context)
  })
}
