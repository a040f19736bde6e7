/**
 * limitWebSocket with real `ws` clients against the suite's redis-server. Message limits use day-long
 * sliding logs and connection limits hold leases, so no window boundary falls inside a test.
 */
import type { AddressInfo } from 'node:net'
import { ConfigError, RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { redisUrl } from '@tollgate/testkit'
import { CLOSE_CODE, type LimitWebSocketOptions, limitWebSocket } from '@tollgate/websocket'
import { createClient } from 'redis'
import { WebSocket, WebSocketServer } from 'ws'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const prefix = () => `ws-${process.pid}-${Date.now().toString(36)}-${++n}`
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

const servers: WebSocketServer[] = []
const clients: WebSocket[] = []
afterEach(async () => {
  for (const c of clients.splice(0)) c.terminate()
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))))
})

/** An echo server: admitted messages come back as `echo:<text>`. */
async function serve(
  options: LimitWebSocketOptions,
  verify = true,
  attach = true,
  host = '127.0.0.1',
): Promise<{ url: string; admitted: () => number }> {
  const limit = limitWebSocket(options)
  let admitted = 0
  const wss = new WebSocketServer({
    port: 0,
    host,
    ...(verify ? { verifyClient: limit.verifyClient } : {}),
  })
  servers.push(wss)
  wss.on('connection', async (socket, req) => {
    socket.on('message', (data) => socket.send(`echo:${String(data)}`))
    if (attach && (await limit.attach(socket, req))) admitted++
  })
  await new Promise((r) => wss.once('listening', r))
  return { url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, admitted: () => admitted }
}

type Outcome =
  | { open: true; socket: WebSocket }
  | { open: false; status?: number; body?: string; code?: number; reason?: string }

/** Connects; resolves once open (after one round trip proving admission) or refused. */
function connect(url: string, headers: Record<string, string> = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { headers })
    socket.on('error', () => {}) // a refused upgrade; its outcome is resolved below
    clients.push(socket)
    socket.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ open: false, status: res.statusCode, body }))
    })
    socket.once('open', () => {
      socket.send('hello')
      socket.once('message', () => resolve({ open: true, socket }))
    })
    socket.once('close', (code, reason) => resolve({ open: false, code, reason: String(reason) }))
  })
}

const nextMessage = (socket: WebSocket) =>
  new Promise<string>((resolve) => socket.once('message', (d) => resolve(String(d))))
const closed = (socket: WebSocket) => new Promise((r) => socket.once('close', r))

describe('limitWebSocket', () => {
  it('the (limit+1)th connection of one identity gets HTTP 429 before the upgrade; closing one frees its place', async () => {
    const { url } = await serve({ connections: connections(2), key: (req) => String(req.headers['x-user']) })
    const a = await connect(url, { 'x-user': 'ann' })
    const b = await connect(url, { 'x-user': 'ann' })
    expect([a.open, b.open]).toEqual([true, true])
    const refused = await connect(url, { 'x-user': 'ann' })
    expect(refused).toMatchObject({ open: false, status: 429 })
    const body = JSON.parse((refused as { body: string }).body)
    expect(body.type).toBe('rate_limited')
    expect(body.retryAfterMs).toBeGreaterThan(0)
    // another identity has its own slots
    expect((await connect(url, { 'x-user': 'bob' })).open).toBe(true)
    if (!a.open) throw new Error('unreachable')
    a.socket.close()
    await closed(a.socket)
    // the release lands after the server saw the close: retry until it did (bounded)
    let again: Outcome = { open: false }
    for (let i = 0; i < 50 && !again.open; i++) again = await connect(url, { 'x-user': 'ann' })
    expect(again.open).toBe(true)
  })

  it('a connection admitted by verifyClient but never attached frees its place when it closes', async () => {
    const { url } = await serve({ connections: connections(1), key: () => `na${n}` }, true, false)
    const first = new WebSocket(url)
    clients.push(first)
    await new Promise((r) => first.once('open', r))
    expect(await connect(url)).toMatchObject({ open: false, status: 429 })
    first.close()
    await closed(first)
    let again = false
    for (let i = 0; i < 50 && !again; i++) {
      again = await new Promise<boolean>((resolve) => {
        const s = new WebSocket(url)
        s.on('error', () => {})
        clients.push(s)
        s.once('open', () => resolve(true))
        s.once('unexpected-response', () => resolve(false))
      })
    }
    expect(again).toBe(true)
  })

  it('without verifyClient the refused connection is closed with 4429 and the retry time as JSON', async () => {
    const { url } = await serve({ connections: connections(1), key: () => 'one' }, false)
    expect((await connect(url)).open).toBe(true)
    const refused = await connect(url)
    expect(refused).toMatchObject({ open: false, code: CLOSE_CODE })
    const reason = JSON.parse((refused as { reason: string }).reason)
    expect(reason).toEqual({ type: 'rate_limited', retryAfterMs: expect.any(Number) })
    expect(reason.retryAfterMs).toBeGreaterThan(0)
  })

  it('a key that throws closes the socket with 1011; attach resolves false and nothing rejects', async () => {
    const rejections: unknown[] = []
    const onRejection = (reason: unknown) => rejections.push(reason)
    process.on('unhandledRejection', onRejection)
    const error = jest.spyOn(console, 'error').mockImplementation(() => {})
    try {
      const { url, admitted } = await serve(
        {
          connections: connections(1),
          key: () => {
            throw new Error('no user')
          },
        },
        false,
      )
      expect(await connect(url)).toMatchObject({ open: false, code: 1011 })
      await new Promise((r) => setTimeout(r, 50))
      expect(admitted()).toBe(0)
      expect(rejections).toEqual([])
      expect(error).toHaveBeenCalledWith(expect.stringContaining('no user'))
    } finally {
      process.off('unhandledRejection', onRejection)
      error.mockRestore()
    }
  })

  it('the default identity is the canonical address: an IPv4 client of a dual-stack server is its IPv4', async () => {
    const limit = connections(1)
    const { url } = await serve({ connections: limit }, true, true, '::')
    const one = await connect(url)
    expect(one.open).toBe(true)
    // held under 127.0.0.1; nothing under the raw ::ffff:127.0.0.1
    expect((await limit.peek('127.0.0.1')).allowed).toBe(false)
    expect((await limit.peek('::ffff:127.0.0.1')).allowed).toBe(true)
  })

  it('a burst of 30 concurrent connections from 3 clients of one identity admits exactly the limit', async () => {
    const { url, admitted } = await serve({ connections: connections(7), key: () => 'burst' })
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, (_, i) => connect(url, { 'x-client': `${i % 3}` })),
    )
    expect(outcomes.filter((o) => o.open)).toHaveLength(7)
    expect(outcomes.filter((o) => !o.open && 'status' in o && o.status === 429)).toHaveLength(23)
    expect(admitted()).toBe(7)
  })

  it('messages past the limit get the reply frame, in order, and the connection stays open', async () => {
    const messages = limiter({ limit: 3, window: '1d', algorithm: 'sliding-log' })
    const { url } = await serve({ messages, key: () => `m-${n}` })
    const o = await connect(url) // 'hello' spent 1
    if (!o.open) throw new Error('not admitted')
    const replies: string[] = []
    o.socket.on('message', (d) => replies.push(String(d)))
    for (const t of ['a', 'b', 'c', 'd']) o.socket.send(t)
    while (replies.length < 4) await nextMessage(o.socket)
    expect(replies.slice(0, 2)).toEqual(['echo:a', 'echo:b'])
    for (const r of replies.slice(2)) {
      const frame = JSON.parse(r)
      expect(frame.type).toBe('rate_limited')
      expect(frame.retryAfterMs).toBeGreaterThan(0)
    }
    expect(o.socket.readyState).toBe(WebSocket.OPEN)
  })

  it('per-connection and per-identity message policies in one call; cost from the message', async () => {
    const messages = limiter({
      policies: {
        connection: { limit: 4, window: '1d', algorithm: 'sliding-log' },
        identity: { limit: 6, window: '1d', algorithm: 'sliding-log' },
      },
    })
    const { url } = await serve({
      messages,
      perConnection: ['connection'],
      key: () => 'pc',
      cost: (data) => (String(data).startsWith('big') ? 3 : 1),
    })
    const a = await connect(url) // hello: connection a 1, identity 1
    const b = await connect(url) // hello: connection b 1, identity 2
    if (!a.open || !b.open) throw new Error('not admitted')
    a.socket.send('big')
    expect(await nextMessage(a.socket)).toBe('echo:big') // a 4, identity 5
    a.socket.send('x')
    expect(JSON.parse(await nextMessage(a.socket)).type).toBe('rate_limited') // a full
    b.socket.send('y')
    expect(await nextMessage(b.socket)).toBe('echo:y') // identity 6
    b.socket.send('z')
    expect(JSON.parse(await nextMessage(b.socket)).type).toBe('rate_limited') // identity full
  })

  it("the store's failure policy answers: 'deny' refuses the connection, 'allow' admits it", async () => {
    const dead = createClient({ url: redisUrl() }).on('error', () => {})
    await dead.connect()
    await dead.quit()
    const down = (onStoreError: 'allow' | 'deny') =>
      new RateLimiter({
        store: new RedisStore(dead),
        prefix: prefix(),
        policies: { open: { concurrency: 5 } },
        onStoreError,
      })
    const denied = await serve({ connections: down('deny'), key: () => 'd' })
    const refused = await connect(denied.url)
    expect(refused).toMatchObject({ open: false, status: 429 })
    expect(JSON.parse((refused as { body: string }).body).retryAfterMs).toBeGreaterThanOrEqual(1000)
    const allowed = await serve({ connections: down('allow'), key: () => 'd' })
    expect((await connect(allowed.url)).open).toBe(true)
  })
})

describe('limitWebSocket options', () => {
  const bad: [string, unknown, string][] = [
    ['neither limiter', { connections: undefined }, 'connections'],
    ['connections not a limiter', { connections: {} }, 'connections'],
    ['messages not a limiter', { messages: 3 }, 'messages'],
    ['key not a function', { key: 'ip' }, 'key'],
    ['a negative cost', { cost: -1 }, 'cost'],
    ['perConnection naming no policy', { perConnection: ['nope'] }, 'perConnection'],
  ]
  it.each(bad)('%s: ConfigError naming the option', (_name, options, option) => {
    let thrown: unknown
    try {
      limitWebSocket({ connections: connections(1), ...(options as object) } as LimitWebSocketOptions)
    } catch (e) {
      thrown = e
    }
    expect(thrown).toBeInstanceOf(ConfigError)
    expect((thrown as ConfigError).option).toBe(option)
  })

  it('a rate policy among the connection policies is refused: a connection holds a lease', () => {
    expect(() => limitWebSocket({ connections: limiter({ limit: 5, window: '1m' }) })).toThrow(
      /connections\.policies\.default/,
    )
  })
})
