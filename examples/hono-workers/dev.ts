/**
 * Runs the Worker locally in `workerd`, the Workers runtime itself, from npm (`pnpm dev`): no wrangler, so
 * it works on Node 20 (wrangler 4 needs Node 22). It bundles src/index.ts with esbuild as wrangler would,
 * then serves it on http://127.0.0.1:8787 (PORT) behind a small proxy that sets `CF-Connecting-IP` to the
 * caller's address, overwriting any value the caller sent, as Cloudflare's edge does.
 *
 * Redis: `UPSTASH_REDIS_REST_URL` / `UPSTASH_REDIS_REST_TOKEN` if set (your Upstash database); otherwise
 * a local Upstash-compatible REST server in front of `REDIS_URL`, or of a redis-server started here.
 */
import http from 'node:http'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { bundleWorker, startWorkerd } from '../../packages/testkit/src/edge-runtimes'
import { startRedisServer } from '../../packages/testkit/src/redis-server'
import { startUpstashServer } from '../../packages/testkit/src/upstash-server'

const here = path.dirname(fileURLToPath(import.meta.url))
const port = Number(process.env.PORT ?? 8787)
const cleanup: (() => Promise<void>)[] = []

let url = process.env.UPSTASH_REDIS_REST_URL
let token = process.env.UPSTASH_REDIS_REST_TOKEN
if (!url || !token) {
  let redisPort: number
  if (process.env.REDIS_URL) {
    redisPort = Number(new URL(process.env.REDIS_URL).port || 6379)
  } else {
    const redis = await startRedisServer()
    cleanup.push(() => redis.stop())
    redisPort = redis.port
  }
  const rest = await startUpstashServer({ redisPort })
  cleanup.push(() => rest.stop())
  url = rest.url
  token = rest.token
  console.log(`Upstash REST API (local, over redis-server :${redisPort}) at ${url}`)
}

const bundle = await bundleWorker(path.join(here, 'src/index.ts'))
const workerd = await startWorkerd({
  code: bundle.code,
  bindings: {
    UPSTASH_REDIS_REST_URL: url,
    UPSTASH_REDIS_REST_TOKEN: token,
    TOLLGATE_PREFIX: process.env.TOLLGATE_PREFIX ?? 'hono-workers',
    TOLLGATE_TIMEOUT_MS: process.env.TOLLGATE_TIMEOUT_MS ?? '1000',
  },
  onOutput: (text) => process.stderr.write(text),
})
cleanup.unshift(() => workerd.stop())

const upstream = new URL(workerd.url)
const proxy = http.createServer((req, res) => {
  const headers = { ...req.headers, 'cf-connecting-ip': req.socket.remoteAddress ?? '' }
  const out = http.request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(res)
    },
  )
  out.on('error', () => {
    res.writeHead(502).end()
  })
  req.pipe(out)
})
await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve))
console.log(`worker (${bundle.gzipBytes} B gzipped) in workerd, listening on http://127.0.0.1:${port}`)

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, async () => {
    proxy.close()
    for (const stop of cleanup) await stop().catch(() => {})
    process.exit(0)
  })
}
