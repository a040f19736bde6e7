/**
 * Type tests: `tsc --noEmit` (pnpm typecheck) checks every line here; jest runs the one test at the end so
 * the file also proves the typed usage works. `@ts-expect-error` lines fail the type check if they compile.
 */
import { type Decision, MemoryStore, RateLimiter } from '@tollgate/core'
import tollgate, {
  type OnLimited,
  type RateLimitHook,
  type TollgateOptions,
  type TollgateRouteOptions,
} from '@tollgate/fastify'
import Fastify, { type FastifyRequest, type RouteShorthandOptions } from 'fastify'

const limiter = new RateLimiter({ store: new MemoryStore(), limit: 5, window: '1m' })

// request.rateLimit is declared on FastifyRequest (declaration merging), and optional.
function readDecision(request: FastifyRequest): Decision | undefined {
  const d: Decision | undefined = request.rateLimit
  // @ts-expect-error possibly undefined: not every route is limited
  const remaining: number = request.rateLimit.remaining
  return remaining >= 0 ? d : undefined
}

// config.rateLimit on route options: options or false, checked.
const routeWithOptions: RouteShorthandOptions = {
  config: { rateLimit: { limit: 10, window: '1m', hook: 'preHandler' } },
}
const routeExempt: RouteShorthandOptions = { config: { rateLimit: false } }
// @ts-expect-error `true` is not a rate-limit config
const routeTrue: RouteShorthandOptions = { config: { rateLimit: true } }
// @ts-expect-error unknown hook
const badHook: TollgateRouteOptions = { hook: 'onSend' }
// @ts-expect-error the window is a Duration, not any string
const badWindow: TollgateRouteOptions = { limit: 1, window: '1 minute' }

// Request functions receive the FastifyRequest.
const keyed: TollgateRouteOptions = {
  key: (request) => ({ ip: request.ip, account: String((request.body as { email?: string }).email) }),
  cost: async (request) => (request.method === 'POST' ? 2 : 1),
  skip: (request) => request.url.startsWith('/internal'),
}
const onLimited: OnLimited = (request, reply, decision) =>
  reply.code(429).send({ url: request.url, retry: decision.retryAfterMs })
const hook: RateLimitHook = 'preValidation'

// Plugin options: the route options plus global / notFound.
const pluginOptions: TollgateOptions = { limiter, global: false, notFound: true, onLimited, hook }
// @ts-expect-error global is a boolean
const badGlobal: TollgateOptions = { limiter, global: 'yes' }

void [readDecision, routeWithOptions, routeExempt, routeTrue, badHook, badWindow, keyed, badGlobal]

it('typed usage registers and serves', async () => {
  const app = Fastify()
  await app.register(tollgate, pluginOptions)
  app.get('/a', { config: { rateLimit: keyed } }, async (request) => readDecision(request)?.limit ?? null)
  app.get('/b', routeExempt, async (request) => request.rateLimit === undefined)
  await app.ready()
  expect(app.hasRequestDecorator('rateLimit')).toBe(true)
  await app.close()
})
