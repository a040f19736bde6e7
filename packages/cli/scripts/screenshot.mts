/**
 * docs/images/dashboard.png: the dashboard over a throwaway redis-server with a few refused identities
 * and two blocks and a live /metrics endpoint, captured in headless Chromium. Run: pnpm --filter @tollgate/cli screenshot
 */
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import testkit from '@tollgate/testkit'
import { Registry } from 'prom-client'
import { createClient } from 'redis'
import { startDashboard } from '../src/index.ts'

// the testkit is CommonJS: its re-exports are not named imports here
const { findChromium, launchChromium, startRedisServer } = testkit
const out = fileURLToPath(new URL('../../../docs/images/dashboard.png', import.meta.url))
const bin = findChromium()
if (!bin) throw new Error('chromium is not installed (apt-get install -y chromium)')

const server = await startRedisServer()
const client = createClient({ url: server.url })
client.on('error', () => {})
await client.connect()
const registry = new Registry()
collectTollgateMetrics({ registry })
const web = http.createServer(async (_req, res) => {
  res.setHeader('content-type', registry.contentType)
  res.end(await registry.metrics())
})
await new Promise<void>((r) => web.listen(0, '127.0.0.1', r))
const api = new RateLimiter({
  store: new RedisStore(client),
  name: 'api',
  prefix: 'shop',
  policies: { burst: { limit: 5, window: '1m' }, hourly: { limit: 40, window: '1h' } },
})
const board = await startDashboard(
  {
    url: server.url,
    prefix: 'shop',
    port: '0',
    metrics: `http://127.0.0.1:${(web.address() as { port: number }).port}/metrics`,
    interval: '500ms',
    policy: ['burst=5/1m', 'hourly=40/1h'],
  },
  { out: (l) => console.log(l), err: (l) => console.error(l) },
)
await api.block('ip:198.51.100.23', { for: '2h', reason: 'credential stuffing' })
await api.block('key:leaked-7f3a', { for: '1d', reason: 'key posted publicly' })
await api.overrides.set('key:acme', { hourly: { limit: 400 } }, { ttl: '30d' })
const who = ['user:42', 'user:7', 'ip:203.0.113.9', 'key:ci-bot', 'user:3']
let stop = false
const traffic = (async () => {
  for (let i = 0; !stop; i++) {
    const id = who[Math.min(who.length - 1, Math.floor(Math.random() ** 2 * who.length))] as string
    await api.consume({ burst: id, hourly: id })
    await api.consume({ burst: `visitor:${i}`, hourly: `visitor:${i}` })
    await new Promise((r) => setTimeout(r, 15 + 25 * Math.abs(Math.sin(i / 40))))
  }
})()
const browser = await launchChromium(bin)
try {
  await new Promise((r) => setTimeout(r, 12_000))
  await api.top()
  const page = await browser.open(board.url, { width: 1100, height: 1240 })
  await page.waitFor(
    `document.querySelectorAll('#top tbody tr').length >= 3 && document.querySelector('#chart polyline')`,
  )
  await page.evaluate(
    `document.querySelector('#identity').value = 'user:42'; document.querySelector('#lookup button').click()`,
  )
  await new Promise((r) => setTimeout(r, 600))
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.writeFileSync(out, await page.screenshot())
  console.log(`wrote ${out}`)
} finally {
  stop = true
  await traffic
  await browser.close()
  await board.close()
  web.close()
  await client.quit()
  await server.stop()
}
