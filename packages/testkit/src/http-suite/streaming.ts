/**
 * Streamed bodies: the `settle` option and concurrency leases end when the body has been sent to its
 * end, or when the client goes away mid-stream, with what was produced by then.
 */
import http from 'node:http'
import type { RateLimiter } from '@tollgate/core'
import type { SuiteContext } from './context'
import type { RunningApp, SuiteOptions, SuiteStream } from './types'
import { eventually } from './waiting'

/** A {@link SuiteStream} of `units` units that stops before unit `pauseAt` until `resume()`. */
export function suiteStream(units: number, pauseAt = Number.POSITIVE_INFINITY) {
  let produced = 0
  let resume!: () => void
  const resumed = new Promise<void>((resolve) => {
    resume = resolve
  })
  const stream: SuiteStream = {
    units,
    get produced() {
      return produced
    },
    async next() {
      if (produced === pauseAt) await resumed
      if (produced === units) return null
      produced++
      return 'x'
    },
  }
  return { stream, resume }
}

/** A GET whose body is read as it comes: wait for some of it, all of it, or go away. */
function streamingGet(app: RunningApp, path: string) {
  const url = new URL(app.url)
  const req = http.get({ host: url.hostname, port: url.port, path, agent: false })
  req.on('error', () => undefined)
  let received = 0
  let ended = false
  let wake: (() => void) | undefined
  const status = new Promise<number>((resolve) =>
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        received += chunk.length
        wake?.()
      })
      res.on('end', () => {
        ended = true
        wake?.()
      })
      res.on('error', () => undefined)
      resolve(res.statusCode ?? 0)
    }),
  )
  const until = async (done: () => boolean) => {
    await status
    while (!done()) await new Promise<void>((resolve) => (wake = resolve))
  }
  return {
    status,
    /** Resolves once at least `n` bytes have arrived. */
    received: (n: number) => until(() => received >= n),
    /** The whole body's length, once it has ended. */
    end: async () => {
      await until(() => ended)
      return received
    },
    abort: () => req.destroy(),
  }
}

export function describeStreaming(s: SuiteContext): void {
  const { limiter, start, get } = s
  describe('streamed bodies', () => {
    const IP = '127.0.0.1' // the default app-wide key: the canonical client address
    const remaining = async (api: RateLimiter) => (await api.peek(IP)).remaining
    // An estimate of 10 on a budget of 1000 a day (gcra: nothing refills within a test); the true
    // cost is what the body produced, read when the adapter settles.
    const tokens = () => limiter({ limit: 1000, window: '1d', algorithm: 'gcra' })
    const settling = (api: RateLimiter, stream: SuiteStream): SuiteOptions => ({
      limiter: api,
      cost: 10,
      settle: () => stream.produced,
    })

    it('settles what the body produced once it has been sent: 100 units read fully, 100 charged', async () => {
      const api = tokens()
      const { stream } = suiteStream(100)
      const app = await start({
        app: settling(api, stream),
        routes: [{ method: 'GET', path: '/stream', stream }],
      })
      const res = streamingGet(app, '/stream')
      expect(await res.status).toBe(200)
      expect(await res.end()).toBe(100)
      await eventually(async () => (await remaining(api)) !== 990, 'the stream was settled')
      expect(await remaining(api)).toBe(900)
    })

    it('a client that goes away after 50 of 100 units is charged the 50 produced', async () => {
      const api = tokens()
      const { stream, resume } = suiteStream(100, 50)
      const app = await start({
        app: settling(api, stream),
        routes: [{ method: 'GET', path: '/stream', stream }],
      })
      const res = streamingGet(app, '/stream')
      expect(await res.status).toBe(200)
      await res.received(50)
      expect(stream.produced).toBe(50)
      res.abort()
      await eventually(async () => (await remaining(api)) !== 990, 'the cancelled stream was settled')
      expect(await remaining(api)).toBe(950)
      resume()
    })

    const slotFree = (api: RateLimiter) => async () => (await remaining(api)) === 1

    it('a concurrency lease is held while the body streams, and released when it has been sent', async () => {
      const api = limiter({ concurrency: 1, lease: '1m' })
      const { stream, resume } = suiteStream(100, 50)
      const app = await start({
        app: { limiter: api },
        routes: [
          { method: 'GET', path: '/stream', stream },
          { method: 'GET', path: '/hello' },
        ],
      })
      const res = streamingGet(app, '/stream')
      expect(await res.status).toBe(200)
      await res.received(50)
      expect((await get(app, '/hello')).status).toBe(429) // the stream still holds the slot
      resume()
      expect(await res.end()).toBe(100)
      await eventually(slotFree(api), 'the slot was released after the body ended')
      expect((await get(app, '/hello')).status).toBe(200)
    })

    it('a concurrency lease is released when the client goes away mid-stream', async () => {
      const api = limiter({ concurrency: 1, lease: '1m' })
      const { stream, resume } = suiteStream(100, 50)
      const app = await start({
        app: { limiter: api },
        routes: [{ method: 'GET', path: '/stream', stream }],
      })
      const res = streamingGet(app, '/stream')
      expect(await res.status).toBe(200)
      await res.received(50)
      expect(await remaining(api)).toBe(0)
      res.abort()
      await eventually(slotFree(api), 'the slot was released when the client went away')
      resume()
    })
  })
}
