/**
 * The metered API: `GET /v1/things` with an `X-Api-Key` header. The key picks the customer's plan; the
 * limiter spends on the key, with the plan's monthly quota passed per request (`limits`). A customer the
 * operator raised with `tollgate override set` gets the override instead, on the next request of every
 * process, with no deploy.
 */
import { RateLimiter, type Store } from '@tollgate/core'
import { rateLimiter } from '@tollgate/hono'
import { Hono } from 'hono'
import limits, { PLANS, type Plan } from './limits'

// Demo data; a real API looks the key up in its database.
export const CUSTOMERS = new Map<string, Plan>([
  ['key_free', 'free'],
  ['key_pro', 'pro'],
  ['key_big', 'pro'],
  ['key_inv', 'pro'], // invoiced on the 17th: its month starts then (an override's billingDay)
])

export function createApp(store: Store): { app: Hono; limiter: RateLimiter } {
  const limiter = new RateLimiter({ store, ...limits })
  const app = new Hono()
  app.use('/v1/*', async (c, next) => {
    if (!CUSTOMERS.has(c.req.header('x-api-key') ?? '')) return c.json({ error: 'unknown API key' }, 401)
    await next()
  })
  app.use(
    '/v1/*',
    rateLimiter({
      limiter,
      key: (c) => `key:${c.req.header('x-api-key')}`,
      limits: (c) => ({ monthly: PLANS[CUSTOMERS.get(c.req.header('x-api-key')!)!] }),
    }),
  )
  app.get('/v1/things', (c) => c.json({ things: [], plan: CUSTOMERS.get(c.req.header('x-api-key')!) }))
  return { app, limiter }
}
