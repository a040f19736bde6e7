/**
 * The app every runtime of the edge test serves: one Hono app, one limiter (limit 5 a day per client
 * address) on a RedisStore over `@upstash/redis`. Each entry file (workerd, edge-runtime, Node) only
 * says where the client and the address come from.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { type GetClientAddress, rateLimiter } from '@tollgate/hono'
import { Hono } from 'hono'

export interface EdgeAppOptions {
  /** An `@upstash/redis` client (the runtime's own entry point). */
  redis: unknown
  getConnInfo: GetClientAddress
  prefix: string
  runtime: string
}

export function createEdgeApp({ redis, getConnInfo, prefix, runtime }: EdgeAppOptions): Hono {
  const limiter = new RateLimiter({
    store: new RedisStore(redis),
    prefix,
    limit: 5,
    window: '1d',
    algorithm: 'fixed-window',
    onStoreError: 'deny',
    // Edge clocks and a busy test machine: the deadline must not turn a slow answer into a 503 here.
    timeoutMs: 10_000,
  })
  const app = new Hono()
  app.get('/__ready', (c) => c.text('ready'))
  app.get('/runtime', (c) => c.text(runtime))
  app.use('/limited', rateLimiter({ limiter, getConnInfo, legacyHeaders: true }))
  app.get('/limited', (c) => c.json({ ok: true }))
  return app
}
