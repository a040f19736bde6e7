/**
 * The conformance-suite factory for Hono: builds the app an `AppSpec` describes, in plain Hono idiom,
 * and serves it with @hono/node-server on a free loopback port. The client address comes from
 * @hono/node-server's own `getConnInfo`, with `trustProxy` hops when the spec asks for a proxy.
 */
import type { Server } from 'node:http'
import { type ServerType, serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { adapterOptions, loopbackApp, RouteCalls, runRoute, webBody } from '@tollgate/testkit/http-factory'
import type { AppFactory, AppSpec, SuiteOptions, SuiteRequest } from '@tollgate/testkit/http-suite'
import { type Context, Hono } from 'hono'
import { clientAddress, rateLimiter } from '../src'

async function view(c: Context, trustProxy: number): Promise<SuiteRequest> {
  // Hono parses bodies on demand and caches them, so the handler can read the body again.
  const body = c.req.method === 'POST' ? await c.req.json().catch(() => undefined) : undefined
  return { header: (name) => c.req.header(name), body, ip: clientAddress(c, getConnInfo, trustProxy) }
}

/** Suite options to adapter options (the request functions get the suite's view of the context). */
function toHonoOptions(options: SuiteOptions, trustProxy: number): any {
  const extra = trustProxy > 0 ? { getConnInfo, trustProxy } : { getConnInfo }
  return adapterOptions(
    options,
    (c: Context) => view(c, trustProxy),
    (res: Response) => res.status,
    extra,
  )
}

export const honoFactory: AppFactory = async (spec: AppSpec) => {
  const trustProxy = spec.trustProxy || 0
  const app = new Hono()
  const calls = new RouteCalls()
  const mount = (route: AppSpec['routes'][number]) => {
    const handlers: any[] = []
    if (route.options) handlers.push(rateLimiter(toHonoOptions(route.options, trustProxy)))
    handlers.push(async (c: Context) => {
      await runRoute(route, calls)
      if (route.stream) return c.body(webBody(route.stream), 200, { 'Content-Type': 'text/plain' })
      return c.json({ ok: true, route: route.path }, (route.status ?? 200) as 200)
    })
    if (route.method === 'ALL') app.all(route.path, ...(handlers as [any]))
    else app.on([route.method].flat() as string[], route.path, ...(handlers as [any]))
  }
  // Exempt routes come before the app-wide middleware: their handler answers before it is reached.
  for (const route of spec.routes) if (route.options === false) mount(route)
  if (spec.app) app.use(rateLimiter(toHonoOptions(spec.app, trustProxy)))
  for (const route of spec.routes) if (route.options !== false) mount(route)
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s))
    s.once('error', reject)
  })
  return loopbackApp(server as Server, calls)
}
