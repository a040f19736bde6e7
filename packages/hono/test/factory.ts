/**
 * The conformance-suite factory for Hono: builds the app an `AppSpec` describes, in plain Hono idiom,
 * and serves it with @hono/node-server on a free loopback port. The client address comes from
 * @hono/node-server's own `getConnInfo`, with `trustProxy` hops when the spec asks for a proxy.
 */
import { type ServerType, serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import type { AppFactory, AppSpec, SuiteOptions, SuiteRequest } from '@tollgate/testkit/http-suite'
import { type Context, Hono } from 'hono'
import { clientAddress, rateLimiter } from '../src'

async function view(c: Context, trustProxy: number): Promise<SuiteRequest> {
  // Hono parses bodies on demand and caches them, so the handler can read the body again.
  const body = c.req.method === 'POST' ? await c.req.json().catch(() => undefined) : undefined
  return { header: (name) => c.req.header(name), body, ip: clientAddress(c, getConnInfo, trustProxy) }
}

/** Suite options to adapter options: only key/cost/skip functions are wrapped; the rest goes as is. */
function toHonoOptions(options: SuiteOptions, trustProxy: number): any {
  const out: Record<string, unknown> = { ...options, getConnInfo }
  if (trustProxy > 0) out.trustProxy = trustProxy
  for (const name of ['key', 'cost', 'skip', 'limits'] as const) {
    const f = options[name]
    if (typeof f === 'function') {
      out[name] = async (c: Context, info: unknown) =>
        (f as (r: SuiteRequest, i: unknown) => unknown)(await view(c, trustProxy), info)
    }
  }
  const successful = options.requestWasSuccessful
  if (typeof successful === 'function')
    out.requestWasSuccessful = async (c: Context, res: Response) =>
      successful(await view(c, trustProxy), { status: res.status })
  return out
}

export const honoFactory: AppFactory = async (spec: AppSpec) => {
  const trustProxy = spec.trustProxy || 0
  const app = new Hono()
  const counts = new Map<string, number>()
  const mount = (route: AppSpec['routes'][number]) => {
    const handlers: any[] = []
    if (route.options) handlers.push(rateLimiter(toHonoOptions(route.options, trustProxy)))
    handlers.push(async (c: Context) => {
      counts.set(route.path, (counts.get(route.path) ?? 0) + 1)
      if (route.hold) await route.hold()
      if (route.throws) throw new Error('handler failed')
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
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    calls: (path) => counts.get(path) ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        if ('closeAllConnections' in server) server.closeAllConnections()
      }),
  }
}
