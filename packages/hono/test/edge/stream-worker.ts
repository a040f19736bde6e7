/**
 * A Cloudflare module worker streaming through `@tollgate/fetch` (and `@tollgate/hono`), over
 * `@upstash/redis`: each route streams 100 one-byte units, keyed on `?k=`, stopping before unit `pause`
 * (if given) until `GET /resume?k=`. `/fetch/stream` and `/hono/stream` (estimate 10) settle to the
 * units produced; `/fetch/leased` holds a concurrency slot (one at a time); `GET /remaining?k=&of=`
 * answers what a key has left, `GET /produced?k=` how many units its stream produced. The settlement runs in `ctx.waitUntil`, after the response.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { Redis } from '@upstash/redis/cloudflare'
import { Hono } from 'hono'
import { withRateLimit } from '../../../fetch/src'
import { rateLimiter } from '../../src'

interface Env {
  UPSTASH_REDIS_REST_URL: string
  UPSTASH_REDIS_REST_TOKEN: string
  TOLLGATE_PREFIX: string
}

const produced = new Map<string, number>()
const resumed = new Set<string>()
const keyOf = (req: Request) => new URL(req.url).searchParams.get('k') ?? ''

function units(req: Request): Response {
  const k = keyOf(req)
  const pause = Number(new URL(req.url).searchParams.get('pause') ?? Number.POSITIVE_INFINITY)
  produced.set(k, 0)
  const encoder = new TextEncoder()
  let cancelled = false
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const n = produced.get(k)!
      if (n === 100) return controller.close()
      if (n === pause && !resumed.has(k)) {
        // Waits on a timer, as a stream waits on its upstream: workerd cancels a request that waits
        // on nothing at all.
        return new Promise<void>((resolve) => {
          const tick = () => (resumed.has(k) || cancelled ? resolve() : setTimeout(tick, 10))
          tick()
        })
      }
      produced.set(k, n + 1)
      controller.enqueue(encoder.encode('x'))
    },
    cancel() {
      cancelled = true
    },
  })
  return new Response(body, { headers: { 'content-type': 'text/plain' } })
}

// Built on the first request (module workers see `env` only there).
let app: ((req: Request, env: Env, ctx: unknown) => Promise<Response>) | undefined

function build(env: Env) {
  const store = new RedisStore(
    new Redis({ url: env.UPSTASH_REDIS_REST_URL, token: env.UPSTASH_REDIS_REST_TOKEN }),
  )
  const limiter = (name: string, options: object) =>
    new RateLimiter({
      store,
      prefix: `${env.TOLLGATE_PREFIX}-${name}`,
      timeoutMs: 10_000,
      ...options,
    } as never)
  const budget = { limit: 1000, window: '1d', algorithm: 'gcra' }
  const limiters: Record<string, RateLimiter> = {
    fetch: limiter('fetch', budget),
    hono: limiter('hono', budget),
    leased: limiter('leased', { concurrency: 1, lease: '1m' }),
  }
  const settle = (req: Request) => produced.get(keyOf(req))
  const stream = withRateLimit(units, { limiter: limiters.fetch, key: keyOf, cost: 10, settle })
  const leased = withRateLimit(units, { limiter: limiters.leased, key: keyOf })
  const hono = new Hono()
  hono.use(
    rateLimiter({
      limiter: limiters.hono,
      key: (c) => keyOf(c.req.raw),
      cost: 10,
      settle: (c) => settle(c.req.raw),
    }),
  )
  hono.get('/hono/stream', (c) => units(c.req.raw))
  return async (req: Request, _env: Env, ctx: unknown): Promise<Response> => {
    const path = new URL(req.url).pathname
    if (path === '/__ready') return new Response('ready')
    if (path === '/fetch/stream') return stream(req, _env, ctx)
    if (path === '/fetch/leased') return leased(req, _env, ctx)
    if (path === '/hono/stream') return hono.fetch(req, _env, ctx as never)
    if (path === '/resume') {
      resumed.add(keyOf(req))
      return new Response('ok')
    }
    if (path === '/produced') return new Response(String(produced.get(keyOf(req))))
    if (path === '/remaining') {
      const of = limiters[new URL(req.url).searchParams.get('of') ?? 'fetch']!
      return new Response(String((await of.peek(keyOf(req))).remaining))
    }
    return new Response('not found', { status: 404 })
  }
}

export default {
  fetch(request: Request, env: Env, ctx: unknown): Promise<Response> {
    app ??= build(env)
    return app(request, env, ctx)
  },
}
