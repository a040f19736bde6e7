/** The `settle` option through Fastify: the true cost, from a reply header or a function. */
import tollgate from '@tollgate/fastify'
import { remainingIn, settleLimiters } from '@tollgate/testkit/settle-limiters'
import Fastify from 'fastify'
import { inject } from './helpers'

const { tokens } = settleLimiters('fastify')
const remaining = (res: { headers: Record<string, unknown> }) => remainingIn(res.headers.ratelimit as string)

it('settles from a reply header; the next response tells the truth', async () => {
  const { limiter, settled } = tokens()
  const app = Fastify()
  await app.register(tollgate, { limiter, key: () => 'k', cost: 10, settle: { header: 'x-tokens-used' } })
  app.get('/', async (_req, reply) => reply.header('x-tokens-used', '35').send('ok'))
  const first = await inject(app, '/')
  expect(remaining(first)).toBe(90)
  await settled()
  expect(remaining(await inject(app, '/'))).toBe(55)
  await app.close()
})

it('settles from a function on a route, giving back what was not used', async () => {
  const { limiter, settled } = tokens()
  const app = Fastify()
  await app.register(tollgate, { global: false })
  app.get(
    '/',
    { config: { rateLimit: { limiter, key: () => 'k', cost: 40, settle: (req: any) => req.used } } },
    async (req: any) => {
      req.used = 5
      return 'ok'
    },
  )
  await inject(app, '/')
  await settled()
  expect((await limiter.peek('k')).remaining).toBe(95)
  await app.close()
})
