/**
 * The edge test app as a Vercel Edge function (service-worker form, as edge-runtime runs it): the address
 * is `X-Real-IP` through Hono's Vercel getConnInfo. The REST URL and token are inlined at build time.
 */
import { Redis } from '@upstash/redis'
import { getConnInfo } from 'hono/vercel'
import { createEdgeApp } from './app'

declare const TOLLGATE_EDGE_ENV: { url: string; token: string; prefix: string }

const app = createEdgeApp({
  redis: new Redis({ url: TOLLGATE_EDGE_ENV.url, token: TOLLGATE_EDGE_ENV.token }),
  getConnInfo,
  prefix: TOLLGATE_EDGE_ENV.prefix,
  runtime: 'edge-runtime',
})

addEventListener('fetch', (event) => {
  const e = event as Event & { request: Request; respondWith(r: Promise<Response> | Response): void }
  e.respondWith(app.fetch(e.request))
})
