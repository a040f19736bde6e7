/**
 * The dashboard in a real headless Chromium: a limiter refuses an identity, the page lists it, the chart
 * draws decisions per second sampled from a live @tollgate/prometheus endpoint, and the page's Reset button
 * gives the identity its quota back; its Blocks form blocks an identity and its Unblock button ends it. Skipped (with the reason) outside CI when chromium is missing.
 */
import http from 'node:http'
import { type Dashboard, startDashboard } from '@tollgate/cli'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import {
  type Browser,
  chromiumForTests,
  chromiumReady,
  clearOfBoundary,
  launchChromium,
  type RedisServerHandle,
  startRedisServer,
} from '@tollgate/testkit'
import { Registry } from 'prom-client'
import { createClient } from 'redis'

jest.setTimeout(20_000)

const chromium = chromiumForTests()
const quiet = { out: () => {}, err: () => {} }

;(chromium ? describe : describe.skip)('tollgate dashboard in headless Chromium', () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  let web: http.Server
  let board: Dashboard
  let browser: Browser
  let api: RateLimiter
  beforeAll(async () => {
    const launched = chromiumReady(chromium as string).then(launchChromium)
    launched.catch(() => {}) // awaited below, after the server is kept for afterAll to stop
    server = await startRedisServer()
    browser = await launched
    client = createClient({ url: server.url })
    client.on('error', () => {})
    await client.connect()
    const registry = new Registry()
    collectTollgateMetrics({ registry })
    web = http.createServer(async (_req, res) => {
      res.setHeader('content-type', registry.contentType)
      res.end(await registry.metrics())
    })
    await new Promise<void>((r) => web.listen(0, '127.0.0.1', r))
    await clearOfBoundary(3_600_000, 20_000)
    api = new RateLimiter({
      store: new RedisStore(client),
      name: 'api',
      prefix: 'dash',
      limit: 1,
      // every call asks Redis: a reset shows on the next call, not after a cached refusal expires
      denyCache: false,
      window: '1h',
    })
    board = await startDashboard(
      {
        url: server.url,
        prefix: 'dash',
        port: '0',
        metrics: `http://127.0.0.1:${(web.address() as { port: number }).port}/metrics`,
        interval: '200ms',
      },
      quiet,
    )
  }, 660_000) // in CI the browser may still be installing (testkit chromiumReady)
  afterAll(async () => {
    await board?.close()
    await browser?.close()
    web?.close()
    await client?.quit()
    await server?.stop()
  })

  it('shows the refusal and the chart, and its Reset button admits the next call', async () => {
    let stop = false
    const traffic = (async () => {
      while (!stop) {
        await api.consume('user:1')
        await new Promise((r) => setTimeout(r, 30))
      }
    })()
    await new Promise((r) => setTimeout(r, 300))
    await api.top() // adds the refusals tallied so far to the top sets
    const page = await browser.open(board.url)
    try {
      const refused = await page.waitFor<string>(
        `document.querySelector('#top tr[data-identity="user:1"] td:nth-child(4)')?.textContent`,
      )
      expect(Number(refused)).toBeGreaterThan(0)
      // two samples or more: a line per outcome, the refused one above the axis somewhere
      const points = await page.waitFor<string>(
        `Number(document.querySelector('#chart').dataset.samples) >= 2 && document.querySelector('#chart polyline.refused')?.getAttribute('points')`,
      )
      expect(points.split(' ').some((p) => Number(p.split(',')[1]) < 175)).toBe(true)
      expect(await page.evaluate('document.querySelector("#chart polyline.allowed") !== null')).toBe(true)
      stop = true
      await traffic
      expect((await api.consume('user:1')).allowed).toBe(false)
      await page.evaluate(`document.querySelector('#top tr[data-identity="user:1"] button.reset').click()`)
      await page.waitFor(`document.querySelector('#top-note').textContent.startsWith('reset user:1')`)
      expect((await api.consume('user:1')).allowed).toBe(true)
    } finally {
      stop = true
      await traffic
    }
  })

  it('its form blocks an identity for the limiter, and the Unblock button admits it again', async () => {
    const page = await browser.open(board.url)
    await page.waitFor(`document.querySelector('#blocks').dataset.count === '0'`)
    await page.evaluate(`(() => {
      document.querySelector('#block-identity').value = 'user:2'
      document.querySelector('#block-for').value = '30m'
      document.querySelector('#block-reason').value = 'scraping'
      document.querySelector('#block-form').requestSubmit()
    })()`)
    const reason = await page.waitFor<string>(
      `document.querySelector('#blocks tr[data-identity="user:2"] td:nth-child(3)')?.textContent`,
    )
    expect(reason).toBe('scraping')
    expect(await api.consume('user:2')).toMatchObject({ allowed: false, source: 'block' })
    await page.evaluate(`document.querySelector('#blocks tr[data-identity="user:2"] button.unblock').click()`)
    await page.waitFor(`document.querySelector('#blocks-note').textContent === 'unblocked user:2'`)
    // the note is written before the table is drawn again: wait for the redraw
    await page.waitFor(`document.querySelector('#blocks').dataset.count === '0'`)
    expect(await api.consume('user:2')).toMatchObject({ allowed: true, source: 'store' })
  })
})
