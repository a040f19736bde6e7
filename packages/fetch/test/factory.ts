/**
 * The conformance-suite factory for fetch handlers: the app an `AppSpec` describes, written as one
 * `(Request) => Response` function with a tiny router (what a Bun or Deno app looks like), served on Node by
 * @hono/node-server on a free loopback port. Route-level limiters wrap their handler with `withRateLimit`
 * and name their route template; the app-wide one wraps the router. The client address is the socket's,
 * read from @hono/node-server's bindings, or with `trustProxy` hops the X-Forwarded-For entry that many
 * from the right.
 */
import type { Server } from 'node:http'
import { type HttpBindings, type ServerType, serve } from '@hono/node-server'
import { forwardedAddress } from '@tollgate/http'
import { adapterOptions, loopbackApp, RouteCalls, runRoute, webBody } from '@tollgate/testkit/http-factory'
import type { AppFactory, AppSpec, SuiteOptions, SuiteRequest } from '@tollgate/testkit/http-suite'
import { type FetchRateLimitOptions, withRateLimit } from '../src'

type Handler = (req: Request, env: HttpBindings) => Promise<Response>
type Ip = (req: Request, env: HttpBindings) => string | undefined

const addressOf =
  (trustProxy: number): Ip =>
  (req, env) => {
    const socket = env.incoming.socket.remoteAddress
    return trustProxy === 0
      ? socket
      : forwardedAddress(socket, req.headers.get('x-forwarded-for') ?? undefined, trustProxy)
  }

async function view(req: Request, env: HttpBindings, ip: Ip): Promise<SuiteRequest> {
  // A key function must not consume the body the handler may read: it reads a clone.
  const body =
    req.method === 'POST'
      ? await req
          .clone()
          .json()
          .catch(() => undefined)
      : undefined
  return { header: (name) => req.headers.get(name) ?? undefined, body, ip: ip(req, env) }
}

/** Suite options to adapter options (the request functions get the suite's view of the request). */
function toFetchOptions(
  options: SuiteOptions,
  ip: Ip,
  route?: string,
): FetchRateLimitOptions<[HttpBindings]> {
  // The template of the route it wraps, as a user names it; a key or group decides the key instead.
  const named = route !== undefined && options.key === undefined && options.group === undefined
  // The suite's views need the bindings, which option functions do not get: they ride on the request.
  return adapterOptions(
    options,
    (req: Request) => view(req, bindings.get(req)!, ip),
    (res: Response) => res.status,
    named ? { ip, route } : { ip },
  ) as FetchRateLimitOptions<[HttpBindings]>
}
const bindings = new WeakMap<Request, HttpBindings>()

/** `/users/:id` as a pattern over the decoded-or-not path segment, like the other frameworks route it. */
function matcher(template: string): RegExp {
  return new RegExp(`^${template.replace(/:[a-z]+/g, '[^/]+')}$`)
}

export const fetchFactory: AppFactory = async (spec: AppSpec) => {
  const ip = addressOf(spec.trustProxy || 0)
  const calls = new RouteCalls()
  const build = (route: AppSpec['routes'][number]) => {
    const answer: Handler = async () => {
      await runRoute(route, calls)
      if (route.stream)
        return new Response(webBody(route.stream), { headers: { 'Content-Type': 'text/plain' } })
      return Response.json({ ok: true, route: route.path }, { status: route.status ?? 200 })
    }
    const methods = route.method === 'ALL' ? undefined : [route.method].flat()
    return {
      pattern: matcher(route.path),
      methods: methods?.includes('GET') ? [...methods, 'HEAD'] : methods,
      exempt: route.options === false,
      handler: route.options ? withRateLimit(answer, toFetchOptions(route.options, ip, route.path)) : answer,
    }
  }
  const routes = spec.routes.map(build)
  const find = (req: Request, exempt: boolean) => {
    const path = new URL(req.url).pathname
    return routes.find(
      (r) =>
        r.exempt === exempt &&
        r.pattern.test(path) &&
        (r.methods === undefined || r.methods.includes(req.method)),
    )
  }
  const router: Handler = async (req, env) => {
    const route = find(req, false)
    return route ? route.handler(req, env) : new Response('not found', { status: 404 })
  }
  const app = spec.app ? withRateLimit(router, toFetchOptions(spec.app, ip)) : router
  // Exempt routes answer before the app-wide limiter sees them.
  const fetch = async (req: Request, env: HttpBindings) => {
    bindings.set(req, env)
    try {
      return await (find(req, true)?.handler ?? app)(req, env)
    } catch {
      return new Response('internal error', { status: 500 })
    }
  }
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: fetch as never, port: 0, hostname: '127.0.0.1' }, () => resolve(s))
    s.once('error', reject)
  })
  return loopbackApp(server as Server, calls)
}
