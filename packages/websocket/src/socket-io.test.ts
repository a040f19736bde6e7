/**
 * socketIoRateLimit with real socket.io-client clients against the suite's redis-server. Message limits
 * use day-long sliding logs and connection limits hold leases: no window boundary falls inside a test.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ConfigError, RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { type SocketIoRateLimitOptions, socketIoRateLimit } from '@tollgate/websocket'
import { createClient } from 'redis'
import { Server } from 'socket.io'
import { type Socket as ClientSocket, io as connectClient } from 'socket.io-client'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const prefix = () => `sio-${process.pid}-${Date.now().toString(36)}-${++n}`
const limiter = (options: Partial<RateLimiterOptions>) =>
  new RateLimiter({ store, prefix: prefix(), ...options } as RateLimiterOptions)
const connections = (concurrency: number) => limiter({ policies: { open: { concurrency, lease: '1m' } } })

beforeAll(async () => {
  redis = createClient({ url: redisUrl() })
  redis.on('error', () => undefined)
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis.quit()
})

const servers: Server[] = []
const clients: ClientSocket[] = []
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect()
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

async function serve(options: SocketIoRateLimitOptions, wrapped = false): Promise<string> {
  const http = createServer()
  const io = new Server(http)
  servers.push(io)
  const limit = socketIoRateLimit(options)
  io.use(limit)
  io.on('connection', (socket) => {
    const echo = (text: string, ack?: (r: unknown) => void) => ack?.(`echo:${text}`)
    socket.on('echo', wrapped ? limit.event(socket, 'echo', echo, { cost: 2 }) : echo)
    socket.on('free', (text: string, ack: (r: unknown) => void) => ack(`free:${text}`))
  })
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r))
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}`
}

type Outcome = { ok: true; socket: ClientSocket } | { ok: false; message: string; data: unknown }

function connect(url: string, user = 'ann'): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = connectClient(url, { transports: ['websocket'], reconnection: false, auth: { user } })
    clients.push(socket)
    socket.once('connect', () => resolve({ ok: true, socket }))
    socket.once('connect_error', (e) =>
      resolve({ ok: false, message: e.message, data: (e as { data?: unknown }).data }),
    )
  })
}

const key = (socket: { handshake: { auth: Record<string, unknown> } }) => String(socket.handshake.auth.user)

describe('socketIoRateLimit', () => {
  it('the (limit+1)th connection gets connect_error with the refusal; a disconnect frees its place', async () => {
    const url = await serve({ connections: connections(2), key })
    const a = await connect(url)
    expect(a.ok).toBe(true)
    expect((await connect(url)).ok).toBe(true)
    const refused = await connect(url)
    expect(refused).toMatchObject({ ok: false, message: 'rate_limited', data: { type: 'rate_limited' } })
    expect((refused as { data: { retryAfterMs: number } }).data.retryAfterMs).toBeGreaterThan(0)
    expect((await connect(url, 'bob')).ok).toBe(true)
    if (a.ok) a.socket.disconnect()
    let again: Outcome = { ok: false, message: '', data: null }
    for (let i = 0; i < 50 && !again.ok; i++) again = await connect(url)
    expect(again.ok).toBe(true)
  })

  it('a burst of 24 concurrent connections from 3 clients admits exactly the limit', async () => {
    const url = await serve({ connections: connections(5), key: () => 'burst' })
    const outcomes = await Promise.all(Array.from({ length: 24 }, (_, i) => connect(url, `${i % 3}`)))
    expect(outcomes.filter((o) => o.ok)).toHaveLength(5)
    expect(outcomes.filter((o) => !o.ok && o.message === 'rate_limited')).toHaveLength(19)
  })

  it('events past the limit: the ack gets the frame, or a rate_limited event; the socket stays connected', async () => {
    const url = await serve({ messages: limiter({ limit: 2, window: '1d', algorithm: 'sliding-log' }), key })
    const o = await connect(url, `m${n}`)
    if (!o.ok) throw new Error('not admitted')
    const s = o.socket
    expect(await s.emitWithAck('echo', 'a')).toBe('echo:a')
    expect(await s.emitWithAck('free', 'b')).toBe('free:b') // every event counts
    expect(await s.emitWithAck('echo', 'c')).toEqual({
      type: 'rate_limited',
      event: 'echo',
      retryAfterMs: expect.any(Number),
    })
    const event = new Promise((r) => s.once('rate_limited', r))
    s.emit('echo', 'no ack')
    expect(await event).toMatchObject({ type: 'rate_limited', event: 'echo' })
    expect(s.connected).toBe(true)
  })

  it('the per-event wrapper counts only its event, at its cost', async () => {
    const messages = limiter({ limit: 5, window: '1d', algorithm: 'sliding-log' })
    const url = await serve({ messages, key, everyEvent: false }, true)
    const o = await connect(url, `w${n}`)
    if (!o.ok) throw new Error('not admitted')
    for (let i = 0; i < 3; i++) expect(await o.socket.emitWithAck('free', `${i}`)).toBe(`free:${i}`)
    expect(await o.socket.emitWithAck('echo', 'a')).toBe('echo:a') // 2
    expect(await o.socket.emitWithAck('echo', 'b')).toBe('echo:b') // 4
    expect(await o.socket.emitWithAck('echo', 'c')).toMatchObject({ type: 'rate_limited', event: 'echo' })
    expect((await messages.peek(`w${n}`, { cost: 0 })).remaining).toBe(1)
  })

  it('bad options: ConfigError naming the option', () => {
    expect(() => socketIoRateLimit({ connections: connections(1), everyEvent: 'yes' as never })).toThrow(
      ConfigError,
    )
    expect(() => socketIoRateLimit({ connections: connections(1), onLimited: 1 as never })).toThrow(
      /onLimited/,
    )
  })
})
