/**
 * The option-mistake table (testkit/option-suite.ts) against the plugin's options and a route's
 * `config.rateLimit`, on Fastify 5 and 4: the core's messages, word for word (a route's are headed by
 * the route).
 */
import { MemoryStore, RateLimiter } from '@tollgate/core'
import tollgate from '@tollgate/fastify'
import { describeOptionMistakes } from '@tollgate/testkit/option-suite'
import Fastify from 'fastify'
import fastify4 from 'fastify4'
import type { FastifyConstructor } from './factory'

const majors: [string, FastifyConstructor][] = [
  ['fastify 5', Fastify as FastifyConstructor],
  ['fastify 4', fastify4 as unknown as FastifyConstructor],
]

for (const [major, make] of majors) {
  describeOptionMistakes(`${major} plugin`, 'http', async (options) => {
    const app = make()
    try {
      app.register(tollgate, options as never)
      await app.ready()
    } finally {
      await app.close()
    }
  })

  describeOptionMistakes(
    `${major} route config`,
    'http',
    async (options) => {
      const app = make()
      try {
        const limiter = new RateLimiter({ store: new MemoryStore(), limit: 5, window: '1m' })
        await app.register(tollgate, { limiter })
        app.get('/x', { config: { rateLimit: options as never } }, async () => 'ok')
      } finally {
        await app.close()
      }
    },
    'GET /x: config.rateLimit.',
  )
}
