/** The `settle` option through Fastify: the true cost, from a reply header or a function. */
import { type Decision, RateLimiter, RedisStore } from '@tollgate/core'
import tollgate from '@tollgate/fastify'
import Fastify from 'fastify'
import { createClient } from 'redis'
import { inject } from './helpers'

let redis: ReturnType<typeof createClient>
beforeAll(async () => {
  redis = createClient({ url: process.env.REDIS_URL })
  await redis.connect()
})
afterAll(async () => {
  await redis.quit()
})

let n = 0
function tokens(limit = 100) {
  const limiter = new RateLimiter({
    store: new RedisStore(redis),
    prefix: `fastify-settle-${process.pid}-${n++}`,
    limit,
    window: '1d',
    algorithm: 'gcra',
    denyCache: false,
  })
  const landed: Promise<void>[] = []
  let wake: (() => void) | undefined
  const settle = limiter.settle.bind(limiter)
  limiter.settle = (d: Decision, cost: number) => {
    const p = settle(d, cost)
    landed.push(p)
    wake?.()
    return p
  }
  const settled = async (): Promise<void> => {
    while (landed.length === 0) await new Promise<void>((resolve) => (wake = resolve))
    await landed.shift()
  }
  return { limiter, settled }
}

const remaining = (res: { headers: Record<string, unknown> }) =>
  Number(/r=(\d+)/.exec(String(res.headers.ratelimit))![1])

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
