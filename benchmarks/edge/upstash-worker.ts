/**
 * Benchmark worker: the same job with @upstash/ratelimit, wired into Hono the way its docs wire it (it
 * ships no middleware): sliding window 10 per 10 s keyed on CF-Connecting-IP, X-RateLimit-* headers, 429.
 */
import { Ratelimit } from '@upstash/ratelimit'
import { Redis } from '@upstash/redis/cloudflare'
import { Hono } from 'hono'

interface Env {
  UPSTASH_REDIS_REST_URL: string
  UPSTASH_REDIS_REST_TOKEN: string
  PREFIX: string
}

let app: Hono | undefined

function build(env: Env): Hono {
  const ratelimit = new Ratelimit({
    redis: new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN }),
    limiter: Ratelimit.slidingWindow(10, '10 s'),
    prefix: env.PREFIX,
  })
  const hono = new Hono()
  hono.use('/limited', async (c, next) => {
    const ip = c.req.header('cf-connecting-ip') ?? 'anonymous'
    const { success, limit, remaining, reset } = await ratelimit.limit(ip)
    c.header('X-RateLimit-Limit', String(limit))
    c.header('X-RateLimit-Remaining', String(remaining))
    c.header('X-RateLimit-Reset', String(Math.ceil(reset / 1000)))
    if (!success) {
      c.header('Retry-After', String(Math.max(1, Math.ceil((reset - Date.now()) / 1000))))
      return c.text('Too Many Requests', 429)
    }
    await next()
  })
  hono.get('/limited', (c) => c.text('ok'))
  return hono
}

export default {
  fetch(request: Request, env: Env, ctx: unknown) {
    app ??= build(env)
    return app.fetch(request, env, ctx as never)
  },
}
