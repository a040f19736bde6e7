/** Benchmark worker: Hono + @tollgate/hono + @tollgate/core on @upstash/redis, keyed on CF-Connecting-IP. */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { rateLimiter } from '@tollgate/hono'
import { Redis } from '@upstash/redis/cloudflare'
import { Hono } from 'hono'
import { getConnInfo } from 'hono/cloudflare-workers'

interface Env {
  UPSTASH_REDIS_REST_URL: string
  UPSTASH_REDIS_REST_TOKEN: string
  PREFIX: string
}

let app: Hono | undefined

function build(env: Env): Hono {
  const limiter = new RateLimiter({
    store: new RedisStore(
      new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN }),
    ),
    prefix: env.PREFIX,
    limit: 10,
    window: '10s',
  })
  const hono = new Hono()
  hono.use('/limited', rateLimiter({ limiter, getConnInfo }))
  hono.get('/limited', (c) => c.text('ok'))
  return hono
}

export default {
  fetch(request: Request, env: Env, ctx: unknown) {
    app ??= build(env)
    return app.fetch(request, env, ctx as never)
  },
}
