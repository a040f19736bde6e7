/**
 * The conformance-suite factory for Express (4 or 5): builds the app an `AppSpec` describes, in plain
 * Express idiom, and listens on a free loopback port.
 */
import type { Server } from 'node:http'
import { rateLimit } from '@tollgate/express'
import { adapterOptions, loopbackApp, nodeBody, RouteCalls } from '@tollgate/testkit/http-factory'
import type { AppFactory, AppSpec, SuiteOptions, SuiteRequest } from '@tollgate/testkit/http-suite'

/** The parts of `express` (4 or 5) the factory uses. */
type ExpressLike = { (): any; json(): any }

function view(req: any): SuiteRequest {
  return { header: (name) => req.get(name), body: req.body, ip: req.ip }
}

/** Suite options to Express options (the request functions get the suite's view of `req`). */
export function toExpressOptions(options: SuiteOptions): any {
  return adapterOptions(options, view, (res: any) => res.statusCode)
}

export function expressFactory(express: ExpressLike): AppFactory {
  return async (spec: AppSpec) => {
    const app = express()
    app.set('trust proxy', spec.trustProxy ?? false)
    const calls = new RouteCalls()
    const mount = (route: AppSpec['routes'][number]) => {
      const handlers: any[] = []
      if (route.method === 'POST') handlers.push(express.json())
      if (route.options) handlers.push(rateLimit(toExpressOptions(route.options)))
      handlers.push((_req: any, res: any, next: (error?: unknown) => void) => {
        calls.count(route.path)
        const answer = () => {
          if (route.throws) return next(new Error('handler failed')) // Express 4 and 5 alike: a 500
          if (route.stream) return nodeBody(route.stream).pipe(res.status(200).type('text/plain'))
          res.status(route.status ?? 200).json({ ok: true, route: route.path })
        }
        if (route.hold) route.hold().then(answer, next)
        else answer()
      })
      const methods = route.method === 'ALL' ? ['all'] : [route.method].flat()
      for (const method of methods) app[method.toLowerCase()](route.path, ...handlers)
    }
    // Exempt routes come before the app-wide middleware: the Express way to opt a route out.
    for (const route of spec.routes) if (route.options === false) mount(route)
    if (spec.app) app.use(rateLimit(toExpressOptions(spec.app)))
    for (const route of spec.routes) if (route.options !== false) mount(route)
    const server: Server = await new Promise((resolve, reject) => {
      const s = app.listen(0, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(s)))
      s.once('error', reject)
    })
    return loopbackApp(server, calls)
  }
}
