/**
 * limitHonoWebSocket on @hono/node-ws with real `ws` clients against the suite's redis-server. Message
 * limits are day-long sliding logs and connection limits hold leases: no window boundary falls inside.
 */
import type { AddressInfo } from 'node:net'
import { type ServerType, serve } from '@hono/node-server'
import { createNodeWebSocket } from '@hono/node-ws'
import { ConfigError, RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { type LimitHonoWebSocketOptions, limitHonoWebSocket } from '@tollgate/websocket'
import { Hono } from 'hono'
import { createClient } from 'redis'
import { WebSocket } from 'ws'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const prefix = () => `hono-ws-${process.pid}-${Date.now().toString(36)}-${++n}`
const limiter = (options: Partial<RateLimiterOptions>) =>
  new RateLimiter({ store, prefix: prefix(), ...options } as RateLimiterOptions)

beforeAll(async () => {
  redis = createClient({ url: redisUrl() })
  redis.on('error', () => undefined)
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis.quit()
})

const servers: ServerType[] = []
const clients: WebSocket[] = []
afterEach(async () => {
  for (const c of clients.splice(0)) c.terminate()
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))))
})

async function serveApp(options: LimitHonoWebSocketOptions): Promise<string> {
  const app = new Hono()
  const { injectWebSocket, upgradeWebSocket } = createNodeWebSocket({ app })
  const limit = limitHonoWebSocket(options)
  app.get(
    '/ws',
    limit.admit,
    upgradeWebSocket(limit.events(() => ({ onMessage: (evt, ws) => ws.send(`echo:${evt.data}`) }))),
  )
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s))
  })
  injectWebSocket(server)
  servers.push(server)
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}/ws`
}

type Outcome = { open: true; socket: WebSocket } | { open: false; status: number; body: string }

function connect(url: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url)
    socket.on('error', () => {})
    clients.push(socket)
    socket.once('open', () => resolve({ open: true, socket }))
    socket.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ open: false, status: res.statusCode ?? 0, body }))
    })
  })
}
const nextMessage = (socket: WebSocket) =>
  new Promise<string>((resolve) => socket.once('message', (d) => resolve(String(d))))

describe('limitHonoWebSocket', () => {
  it('a burst admits exactly the limit, the rest get 429; a close frees a place', async () => {
    const connections = limiter({ policies: { open: { concurrency: 4, lease: '1m' } } })
    const url = await serveApp({ connections, key: () => 'h' })
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => connect(url)))
    const opened = outcomes.filter((o) => o.open)
    expect(opened).toHaveLength(4)
    for (const o of outcomes) {
      if (o.open) continue
      // @hono/node-ws writes only the status line of a response that is not an upgrade (no body)
      expect(o).toEqual({ open: false, status: 429, body: '' })
    }
    const first = opened[0]
    if (!first?.open) throw new Error('unreachable')
    first.socket.close()
    let again: Outcome = { open: false, status: 0, body: '' }
    for (let i = 0; i < 50 && !again.open; i++) again = await connect(url)
    expect(again.open).toBe(true)
  })

  it('messages past the limit get the reply frame and the connection stays open', async () => {
    const messages = limiter({ limit: 2, window: '1d', algorithm: 'sliding-log' })
    const url = await serveApp({ messages, key: () => `hm${n}` })
    const o = await connect(url)
    if (!o.open) throw new Error('not admitted')
    const replies: string[] = []
    o.socket.on('message', (d) => replies.push(String(d)))
    for (const t of ['a', 'b', 'c']) o.socket.send(t)
    while (replies.length < 3) await nextMessage(o.socket)
    expect(replies.slice(0, 2)).toEqual(['echo:a', 'echo:b'])
    expect(JSON.parse(replies[2] ?? '')).toMatchObject({ type: 'rate_limited' })
    expect(o.socket.readyState).toBe(WebSocket.OPEN)
  })

  it('key is required', () => {
    expect(() => limitHonoWebSocket({ messages: limiter({ limit: 1, window: '1m' }) } as never)).toThrow(
      ConfigError,
    )
  })
})
