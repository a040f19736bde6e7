/**
 * The option-mistake table (testkit/option-suite.ts) against the plugin's options and a route's
 * `config.rateLimit`: the core's messages, word for word (a route's are headed by the route).
 */
import { MemoryStore, RateLimiter } from '@tollgate/core'
import tollgate from '@tollgate/fastify'
import Fastify from 'fastify'
import { describeOptionMistakes } from '../../testkit/src/option-suite'

describeOptionMistakes('fastify plugin', 'http', async (options) => {
  const app = Fastify()
  try {
    app.register(tollgate, options as never)
    await app.ready()
  } finally {
    await app.close()
  }
})

describeOptionMistakes(
  'fastify route config',
  'http',
  async (options) => {
    const app = Fastify()
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
