/** What a finished request gives back: skipFailed/SuccessfulRequests, requestWasSuccessful, shadow mode. */
import type { SuiteContext } from './context'
import { refundWatch } from './refund-watch'
import type { SuiteOptions } from './types'
import { eventually, gate } from './waiting'

export function describeRefundsAndShadow(s: SuiteContext): void {
  const { limiter, start, get, statuses } = s
  describe('refunds and shadow mode', () => {
    it('skipFailedRequests: a route answering 500 is never limited', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        routes: [
          {
            method: 'GET',
            path: '/fail',
            status: 500,
            options: { limiter: api, skipFailedRequests: true },
          },
        ],
      })
      expect(await statuses(app, 6, '/fail')).toEqual([500, 500, 500, 500, 500, 500])
      expect(app.calls('/fail')).toBe(6)
    })

    it('skipFailedRequests: successful requests still count', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        routes: [{ method: 'GET', path: '/hello', options: { limiter: api, skipFailedRequests: true } }],
      })
      expect(await statuses(app, 3, '/hello')).toEqual([200, 200, 429])
    })

    it('skipSuccessfulRequests: only failures count', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        routes: [
          { method: 'GET', path: '/hello', options: { limiter: api, skipSuccessfulRequests: true } },
          {
            method: 'GET',
            path: '/fail',
            status: 500,
            options: { limiter: api, skipSuccessfulRequests: true },
          },
        ],
      })
      expect(await statuses(app, 5, '/hello')).toEqual([200, 200, 200, 200, 200])
      expect(await statuses(app, 3, '/fail')).toEqual([500, 500, 429])
    })

    // A spend is refunded at most once, whatever refunds it: here the adapter (when the request ends)
    // and the app (its handler, like shared error handling) both refund the same request. Three
    // counted, three refunded, then five counted: only two fit. A second refund applied again would
    // hand out another client's spend, and all five would be admitted.
    const refundCases = (['skipFailedRequests', 'skipSuccessfulRequests'] as const).flatMap((skip) =>
      (['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra'] as const).map(
        (algorithm) => [skip, algorithm] as const,
      ),
    )
    it.each(refundCases)(
      '%s plus the app refunding the same request give its spend back once (%s)',
      async (skip, algorithm) => {
        // A day-long window: no window boundary (which would forgive spends) within the test.
        const api = limiter({ limit: 5, window: '1d', algorithm })
        const watch = refundWatch(api)
        const options: SuiteOptions = { limiter: api, key: () => 'client', [skip]: true }
        const refunded = skip === 'skipFailedRequests' ? '/fail' : '/hello'
        const counted = skip === 'skipFailedRequests' ? '/hello' : '/fail'
        const app = await start({
          routes: [
            {
              method: 'GET',
              path: '/hello',
              options,
              hold: refunded === '/hello' ? watch.appRefunds : undefined,
            },
            {
              method: 'GET',
              path: '/fail',
              status: 500,
              options,
              hold: refunded === '/fail' ? watch.appRefunds : undefined,
            },
          ],
        })
        const answer = counted === '/hello' ? 200 : 500
        expect(await statuses(app, 3, counted)).toEqual([answer, answer, answer])
        for (let i = 1; i <= 3; i++) {
          expect((await get(app, refunded)).status).toBe(refunded === '/hello' ? 200 : 500)
          await watch.landed(2 * i) // the adapter's refund and the app's, both applied (or not)
        }
        expect(await statuses(app, 5, counted)).toEqual([answer, answer, 429, 429, 429])
        expect(app.calls(counted)).toBe(5)
        expect(app.calls(refunded)).toBe(3)
      },
    )

    // A token-bucket refund gives back only what the bucket has not refilled yet. Five failing requests
    // hold the whole burst while the bucket refills; five successes take the refilled burst; then the
    // five fail and skipFailedRequests refunds them. Each request is refunded once here: this case
    // rests on the refund's bound, not on the refund-once marker.
    it('token-bucket: refunds of spends the bucket already refilled create no tokens', async () => {
      const api = limiter({ limit: 5, window: '2s', algorithm: 'token-bucket' }) // a token per 400 ms
      const watch = refundWatch(api)
      const failing = gate()
      const options: SuiteOptions = { limiter: api, key: () => 'client', skipFailedRequests: true }
      const app = await start({
        routes: [
          { method: 'GET', path: '/hello', options },
          { method: 'GET', path: '/fail', status: 500, options, hold: failing.hold },
        ],
      })
      const inFlight = Array.from({ length: 5 }, () => get(app, '/fail'))
      await eventually(async () => app.calls('/fail') === 5, 'five failing requests in their handlers')
      // Not a fixed sleep: until the store says the bucket is full again.
      await eventually(async () => (await api.peek('client')).remaining === 5, 'the bucket refilled', 1000)
      const started = Date.now()
      const burst = await statuses(app, 5, '/hello')
      expect(burst).toEqual([200, 200, 200, 200, 200])
      failing.open()
      for (const res of await Promise.all(inFlight)) expect(res.status).toBe(500)
      await watch.landed(5)
      const after = await statuses(app, 5, '/hello')
      // The bucket refills a token per 400 ms of its own; only those may come on top of the burst. A
      // refund that created tokens would admit all five more.
      const refilled = Math.floor((Date.now() - started) / 400)
      expect(after.filter((s) => s === 200).length).toBeLessThanOrEqual(refilled)
    })

    it('requestWasSuccessful decides what counts: a 404 taken as success is counted', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        routes: [
          {
            method: 'GET',
            path: '/fail',
            status: 404,
            options: {
              limiter: api,
              skipFailedRequests: true,
              requestWasSuccessful: (_req, res) => res.status < 400 || res.status === 404,
            },
          },
        ],
      })
      expect(await statuses(app, 3, '/fail')).toEqual([404, 404, 429])
    })

    it('requestWasSuccessful may be async and read the request', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        routes: [
          {
            method: 'GET',
            path: '/hello',
            options: {
              limiter: api,
              skipSuccessfulRequests: true,
              requestWasSuccessful: async (req, res) => res.status === 200 && req.header('x-ok') === 'yes',
            },
          },
        ],
      })
      expect(await statuses(app, 4, '/hello', { 'x-ok': 'yes' })).toEqual([200, 200, 200, 200])
      expect(await statuses(app, 3, '/hello')).toEqual([200, 200, 429])
    })

    it.each([
      [
        'throws',
        () => {
          throw new Error('boom')
        },
      ],
      ['rejects', async () => Promise.reject(new Error('boom'))],
      ['answers a non-boolean', () => 'no' as unknown as boolean],
    ] as const)(
      'requestWasSuccessful that %s counts the request (never a free one)',
      async (_label, predicate) => {
        const api = limiter({ limit: 2, window: '60s' })
        const app = await start({
          routes: [
            {
              method: 'GET',
              path: '/fail',
              status: 500,
              options: { limiter: api, skipFailedRequests: true, requestWasSuccessful: predicate },
            },
          ],
        })
        expect(await statuses(app, 3, '/fail')).toEqual([500, 500, 429])
      },
    )

    it('shadow: never refuses, but counts and shows r=0', async () => {
      const api = limiter({ limit: 2, window: '60s', algorithm: 'gcra' })
      const app = await start({
        app: { limiter: api, shadow: true },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const rs: string[] = []
      for (let i = 0; i < 4; i++) {
        const res = await get(app, '/hello')
        expect(res.status).toBe(200)
        rs.push(/;r=(\d+);/.exec(res.headers.ratelimit as string)![1]!)
      }
      expect(rs).toEqual(['1', '0', '0', '0'])
      expect(app.calls('/hello')).toBe(4)
    })
  })
}
