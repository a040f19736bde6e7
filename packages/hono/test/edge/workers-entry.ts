/** The edge test app as a Cloudflare module worker: `CF-Connecting-IP` through Hono's Workers getConnInfo. */
import { Redis } from '@upstash/redis/cloudflare'
import type { Hono } from 'hono'
import { getConnInfo } from 'hono/cloudflare-workers'
import { createEdgeApp } from './app'

interface Env {
  UPSTASH_REDIS_REST_URL: string
  UPSTASH_REDIS_REST_TOKEN: string
  TOLLGATE_PREFIX: string
}

// One app per isolate, built on the first request (module workers see `env` only there).
let app: Hono | undefined

export default {
  fetch(request: Request, env: Env, ctx: unknown): Response | Promise<Response> {
    app ??= createEdgeApp({
      redis: new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN }),
      getConnInfo,
      prefix: env.TOLLGATE_PREFIX,
      runtime: 'workerd',
    })
    return app.fetch(request, env, ctx as never)
  },
}
