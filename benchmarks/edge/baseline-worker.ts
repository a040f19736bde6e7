/** Benchmark worker: Hono + @upstash/redis and no limiter, the floor both limiters' bundles stand on. */
import { Redis } from '@upstash/redis/cloudflare'
import { Hono } from 'hono'

interface Env {
  UPSTASH_REDIS_REST_URL: string
  UPSTASH_REDIS_REST_TOKEN: string
}

let app: Hono | undefined

export default {
  fetch(request: Request, env: Env, ctx: unknown) {
    app ??= new Hono().get('/limited', async (c) => {
      const redis = new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN })
      return c.text(String(await redis.incr('baseline')))
    })
    return app.fetch(request, env, ctx as never)
  },
}
