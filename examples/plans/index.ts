/**
 * Runnable: `REDIS_URL=redis://127.0.0.1:6379 PORT=3000 node --import tsx index.ts`, then
 *   curl -i -H 'x-api-key: key_free' localhost:3000/v1/things   # RateLimit-Policy: ..."monthly";q=1000...
 * and raise one customer from the command line (every process applies it on its next request):
 *   npx tollgate override set key:key_big monthly=500000 --prefix example-plans \
 *     --policy second=10/1s --policy monthly=100000/month@Europe/Berlin
 */
import { serve } from '@hono/node-server'
import { RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { createApp } from './app'

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' })
redis.on('error', (err) => console.warn('redis:', err.message))
redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
const { app } = createApp(new RedisStore(redis))
const port = Number(process.env.PORT ?? 3000)
serve({ fetch: app.fetch, port }, () => console.log(`listening on http://localhost:${port}`))
