/** Concurrency policies over HTTP: a slot held while the handler runs, released however the request ends. */
import http from 'node:http'
import type { RateLimiter } from '@tollgate/core'
import type { SuiteContext } from './context'
import { exact, PK } from './rate-limit-fields'
import { eventually, gate } from './waiting'

export function describeConcurrency(s: SuiteContext): void {
  const { limiter, start, get } = s
  describe('concurrency limits', () => {
    const IP = '127.0.0.1' // the default app-wide key: the canonical client address
    const slotFree = (api: RateLimiter) => async () => (await api.peek(IP)).remaining === 1

    it('holds a slot while the handler runs: 429 with qu="concurrent-requests"; released on finish', async () => {
      const api = limiter({ concurrency: 1, lease: '1m' })
      const g = gate()
      const app = await start({
        app: { limiter: api },
        routes: [
          { method: 'GET', path: '/slow', hold: g.hold },
          { method: 'GET', path: '/hello' },
        ],
      })
      const slow = get(app, '/slow')
      await eventually(async () => app.calls('/slow') === 1, 'the held handler ran')
      const busy = await get(app, '/hello')
      expect(busy.status).toBe(429)
      expect(busy.headers['ratelimit-policy']).toMatch(
        exact(`"default";q=1;qu="concurrent-requests";pk=:(${PK}):`),
      )
      expect(busy.headers.ratelimit).toMatch(exact(`"default";r=0;t=(60|59);pk=:(${PK}):`))
      expect(busy.json()['violated-policies']).toEqual(['default'])
      expect(app.calls('/hello')).toBe(0)
      g.open()
      const done = await slow
      expect(done.status).toBe(200)
      expect(done.headers.ratelimit).toMatch(exact(`"default";r=0;pk=:(${PK}):`)) // no t while admitted
      await eventually(slotFree(api), 'the slot was released after the response')
      expect((await get(app, '/hello')).status).toBe(200)
      await eventually(slotFree(api), 'released again')
    })

    it('released when the handler throws (a 500)', async () => {
      const api = limiter({ concurrency: 1, lease: '1m' })
      const app = await start({
        app: { limiter: api },
        routes: [{ method: 'GET', path: '/fail', throws: true }],
      })
      expect((await get(app, '/fail')).status).toBe(500)
      await eventually(slotFree(api), 'the slot was released after the error')
      expect((await get(app, '/fail')).status).toBe(500) // admitted again, not 429
      await eventually(slotFree(api), 'released again')
    })

    it('released when the client disconnects, while the handler still runs', async () => {
      const api = limiter({ concurrency: 1, lease: '1m' })
      const g = gate()
      const app = await start({
        app: { limiter: api },
        routes: [{ method: 'GET', path: '/slow', hold: g.hold }],
      })
      const url = new URL(app.url)
      const req = http.get({ host: url.hostname, port: url.port, path: '/slow', agent: false })
      req.on('error', () => undefined)
      await eventually(async () => app.calls('/slow') === 1, 'the held handler ran')
      expect((await api.peek(IP)).remaining).toBe(0)
      req.destroy()
      await eventually(slotFree(api), 'the slot was released when the client went away')
      g.open()
    })

    it('with a rate policy in one call: a refusal by either takes nothing from the other', async () => {
      const api = limiter({
        policies: {
          rate: { limit: 2, window: '1d', algorithm: 'fixed-window' },
          inflight: { concurrency: 1, lease: '1m' },
        },
      })
      const g = gate()
      const app = await start({
        app: { limiter: api },
        routes: [
          { method: 'GET', path: '/slow', hold: g.hold },
          { method: 'GET', path: '/hello' },
        ],
      })
      const slow = get(app, '/slow')
      await eventually(async () => app.calls('/slow') === 1, 'the held handler ran')
      const busy = await get(app, '/hello')
      expect(busy.status).toBe(429)
      expect(busy.json()['violated-policies']).toEqual(['inflight'])
      g.open()
      expect((await slow).status).toBe(200)
      const free = async () => (await api.peek(IP)).policies[1]!.remaining === 1
      await eventually(free, 'released')
      expect((await get(app, '/hello')).status).toBe(200) // the busy 429 did not spend the rate
      await eventually(free, 'released again')
      const spent = await get(app, '/hello')
      expect(spent.status).toBe(429)
      expect(spent.json()['violated-policies']).toEqual(['rate'])
      expect((await api.peek(IP)).policies.map((p) => p.remaining)).toEqual([0, 1]) // no lease taken
    })
  })
}
