/**
 * TollgateWsGuard in real Nest apps with a gateway: `@nestjs/platform-ws` with `ws` clients, and
 * `@nestjs/platform-socket.io` with socket.io-client, against the suite's redis-server. Message limits
 * use day-long sliding logs and connection limits hold leases, so no window boundary falls inside a test.
 */
import 'reflect-metadata'
import type { IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type INestApplication, Module, UseGuards } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { IoAdapter } from '@nestjs/platform-socket.io'
import { WsAdapter } from '@nestjs/platform-ws'
import { MessageBody, type OnGatewayConnection, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets'
import { ConfigError, RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import { RateLimit, SkipRateLimit } from '@tollgate/nestjs'
import {
  CLOSE_CODE,
  TollgateWsGuard,
  TollgateWsModule,
  type TollgateWsOptions,
} from '@tollgate/nestjs/websockets'
import { redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'
import { type Socket as IoSocket, io as ioClient } from 'socket.io-client'
import { WebSocket } from 'ws'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const prefix = () => `nest-ws-${process.pid}-${Date.now().toString(36)}-${++n}`
const limiter = (options: Partial<RateLimiterOptions>) =>
  new RateLimiter({ store, prefix: prefix(), ...options } as RateLimiterOptions)
const perDay = (limit: number) => limiter({ limit, window: '1d', algorithm: 'sliding-log' })
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

const apps: INestApplication[] = []
const closers: Array<() => void> = []
afterEach(async () => {
  for (const close of closers.splice(0)) close()
  await Promise.all(apps.splice(0).map((app) => app.close()))
})

/** Handlers that limit messages, one that is exempt, and one with a limiter of its own. */
function gatewayFor(own?: RateLimiter) {
  @WebSocketGateway()
  @UseGuards(TollgateWsGuard)
  class ChatGateway implements OnGatewayConnection {
    constructor(readonly tollgate: TollgateWsGuard) {}

    handleConnection(client: unknown, request: IncomingMessage) {
      return this.tollgate.connect(client, request)
    }

    @SubscribeMessage('chat')
    chat(@MessageBody() data: { text: string }) {
      return { event: 'chat', data: `echo:${data.text}` }
    }

    @SkipRateLimit()
    @SubscribeMessage('ping')
    ping() {
      return { event: 'pong', data: 'pong' }
    }

    @RateLimit({ limiter: own ?? perDay(1) })
    @SubscribeMessage('upload')
    upload() {
      return { event: 'upload', data: 'stored' }
    }
  }
  return ChatGateway
}

async function serve(
  platform: 'ws' | 'socket.io',
  options: TollgateWsOptions,
  own?: RateLimiter,
): Promise<string> {
  @Module({ imports: [TollgateWsModule.forRoot(options)], providers: [gatewayFor(own)] })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false })
  app.useWebSocketAdapter(platform === 'ws' ? new WsAdapter(app) : new IoAdapter(app))
  apps.push(app)
  await app.listen(0, '127.0.0.1')
  const { port } = app.getHttpServer().address() as AddressInfo
  return platform === 'ws' ? `ws://127.0.0.1:${port}` : `http://127.0.0.1:${port}`
}

/** A `ws` client that reads every frame as `{ event, data }`. */
class Client {
  readonly frames: Array<{ event: string; data: any }> = []
  private waiting: Array<() => void> = []
  closed: Promise<{ code: number; reason: string }>

  constructor(
    readonly socket: WebSocket,
    readonly opened: Promise<void>,
  ) {
    socket.on('message', (d) => {
      this.frames.push(JSON.parse(String(d)))
      for (const w of this.waiting.splice(0)) w()
    })
    this.closed = new Promise((resolve) =>
      socket.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
    )
  }

  static open(url: string): Client {
    const socket = new WebSocket(url)
    socket.on('error', () => {})
    closers.push(() => socket.terminate())
    return new Client(socket, new Promise((r) => socket.once('open', () => r())))
  }

  /** Sends and waits for the one answer each message gets (in order of answers, not of sending). */
  async send(event: string, data: unknown = {}) {
    const seen = this.frames.length
    this.socket.send(JSON.stringify({ event, data }))
    while (this.frames.length === seen) await new Promise<void>((r) => this.waiting.push(r))
    return this.frames[seen]!
  }
}

/** An admitted client: it connected and one skipped message came back (the lease is taken by then). */
async function admitted(url: string): Promise<Client> {
  const c = Client.open(url)
  await c.opened
  expect(await c.send('ping')).toEqual({ event: 'pong', data: 'pong' })
  return c
}

const refusal = (event: string) => ({
  event: 'exception',
  data: { type: 'rate_limited', retryAfterMs: expect.any(Number), event },
})

describe('TollgateWsGuard on @nestjs/platform-ws', () => {
  it('a message over the limit gets the exception frame with retryAfterMs; the socket stays open', async () => {
    const url = await serve('ws', { messages: perDay(2), key: () => `m${n}` })
    const c = await admitted(url)
    expect(await c.send('chat', { text: 'a' })).toEqual({ event: 'chat', data: 'echo:a' })
    expect(await c.send('chat', { text: 'b' })).toEqual({ event: 'chat', data: 'echo:b' })
    const refused = await c.send('chat', { text: 'c' })
    expect(refused).toEqual(refusal('chat'))
    expect(refused.data.retryAfterMs).toBeGreaterThan(0)
    expect(c.socket.readyState).toBe(WebSocket.OPEN)
    // skipped handlers are not counted and still answer
    expect(await c.send('ping')).toEqual({ event: 'pong', data: 'pong' })
  })

  it('identities from the key function do not share a budget', async () => {
    const url = await serve('ws', { messages: perDay(1), key: (_client, data: any) => `user:${data.user}` })
    const c = await admitted(url)
    expect(await c.send('chat', { user: 'ann', text: '1' })).toEqual({ event: 'chat', data: 'echo:1' })
    expect(await c.send('chat', { user: 'ann', text: '2' })).toEqual(refusal('chat'))
    expect(await c.send('chat', { user: 'bob', text: '3' })).toEqual({ event: 'chat', data: 'echo:3' })
  })

  it('by default the identity is the address: two connections share it; perConnection policies do not', async () => {
    const messages = limiter({
      policies: {
        connection: { limit: 2, window: '1d', algorithm: 'sliding-log' },
        identity: { limit: 3, window: '1d', algorithm: 'sliding-log' },
      },
    })
    // the limiter's prefix is this test's own: no other test spends 127.0.0.1's budget here
    const url = await serve('ws', { messages, perConnection: ['connection'] })
    const a = await admitted(url)
    const b = await admitted(url)
    expect(await a.send('chat', { text: 'a1' })).toEqual({ event: 'chat', data: 'echo:a1' })
    expect(await a.send('chat', { text: 'a2' })).toEqual({ event: 'chat', data: 'echo:a2' })
    expect(await a.send('chat', { text: 'a3' })).toEqual(refusal('chat')) // a's connection budget
    expect(await b.send('chat', { text: 'b1' })).toEqual({ event: 'chat', data: 'echo:b1' }) // identity 3
    expect(await b.send('chat', { text: 'b2' })).toEqual(refusal('chat')) // the shared identity budget
  })

  it('@RateLimit({ limiter }) gives a handler its own budget', async () => {
    const url = await serve('ws', { messages: perDay(10), key: () => `own${n}` }, perDay(1))
    const c = await admitted(url)
    expect(await c.send('upload')).toEqual({ event: 'upload', data: 'stored' })
    expect(await c.send('upload')).toEqual(refusal('upload'))
    expect(await c.send('chat', { text: 'x' })).toEqual({ event: 'chat', data: 'echo:x' })
  })

  it('@RateLimit() options other than limiter on a gateway handler refuse its messages, never let them through', async () => {
    @WebSocketGateway()
    @UseGuards(TollgateWsGuard)
    class HttpOptionsGateway {
      @RateLimit({ limiter: perDay(5), skipFailedRequests: true })
      @SubscribeMessage('upload')
      upload() {
        return { event: 'upload', data: 'stored' }
      }
    }
    @Module({ imports: [TollgateWsModule.forRoot({ messages: perDay(5) })], providers: [HttpOptionsGateway] })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false })
    app.useWebSocketAdapter(new WsAdapter(app))
    apps.push(app)
    await app.listen(0, '127.0.0.1')
    const c = Client.open(`ws://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`)
    await c.opened
    expect(await c.send('upload')).toEqual({
      event: 'exception',
      data: expect.objectContaining({ status: 'error', message: 'Internal server error' }),
    })
  })

  it('a connection over the limit is closed with 4429 and the retry time; a closed one frees its slot', async () => {
    const url = await serve('ws', { connections: connections(2), key: () => `c${n}` })
    const a = await admitted(url)
    await admitted(url)
    const refused = Client.open(url)
    const { code, reason } = await refused.closed
    expect(code).toBe(CLOSE_CODE)
    const frame = JSON.parse(reason)
    expect(frame).toEqual({ type: 'rate_limited', retryAfterMs: expect.any(Number) })
    expect(frame.retryAfterMs).toBeGreaterThan(0)
    a.socket.close()
    await a.closed
    // the release lands after the server saw the close: retry until it did (bounded)
    let again: WebSocket['readyState'] = WebSocket.CLOSED
    for (let i = 0; i < 50 && again !== WebSocket.OPEN; i++) {
      const c = Client.open(url)
      await c.opened
      const outcome = await Promise.race([c.send('ping').then(() => 'open'), c.closed.then(() => 'closed')])
      again = outcome === 'open' ? WebSocket.OPEN : WebSocket.CLOSED
    }
    expect(again).toBe(WebSocket.OPEN)
  })

  it('a key function that throws as a connection opens closes it with 1011, never admits it', async () => {
    const url = await serve('ws', {
      connections: connections(5),
      key: (_client, request) => {
        if (request !== undefined) throw new Error('no user')
        return 'never'
      },
    })
    const c = Client.open(url)
    expect((await c.closed).code).toBe(1011)
  })

  it("the store's failure policy answers: 'deny' refuses a message with at least a second to wait", async () => {
    const dead = createClient({ url: redisUrl() }).on('error', () => {})
    await dead.connect()
    await dead.quit()
    const messages = new RateLimiter({
      store: new RedisStore(dead),
      prefix: prefix(),
      limit: 5,
      window: '1m',
      onStoreError: 'deny',
    })
    const url = await serve('ws', { messages })
    const c = await admitted(url)
    const refused = await c.send('chat', { text: 'x' })
    expect(refused).toEqual(refusal('chat'))
    expect(refused.data.retryAfterMs).toBeGreaterThanOrEqual(1000)
  })
})

describe('TollgateWsGuard on @nestjs/platform-socket.io', () => {
  const connectIo = (url: string) => {
    const socket = ioClient(url, { transports: ['websocket'], reconnection: false, forceNew: true })
    closers.push(() => socket.disconnect())
    return socket
  }
  /** Emits and resolves with the first answer: the handler's reply event or an 'exception'. */
  const emit = (socket: IoSocket, event: string, data: unknown = {}) =>
    new Promise<[string, unknown]>((resolve) => {
      const reply = event === 'ping' ? 'pong' : event
      const answer = (name: string) => (value: unknown) => {
        socket.off('exception').off(reply)
        resolve([name, value])
      }
      socket.once('exception', answer('exception'))
      socket.once(reply, answer(reply))
      socket.emit(event, data)
    })

  it("a message over the limit gets an 'exception' event with the frame", async () => {
    const url = await serve('socket.io', { messages: perDay(1), key: () => `io${n}` })
    const s = connectIo(url)
    await new Promise<void>((r) => s.once('connect', () => r()))
    expect(await emit(s, 'chat', { text: 'a' })).toEqual(['chat', 'echo:a'])
    const [kind, frame] = await emit(s, 'chat', { text: 'b' })
    expect(kind).toBe('exception')
    expect(frame).toEqual({ type: 'rate_limited', retryAfterMs: expect.any(Number), event: 'chat' })
    expect((frame as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0)
    expect(s.connected).toBe(true)
  })

  it("a connection over the limit gets a 'rate_limited' event, then is disconnected", async () => {
    const url = await serve('socket.io', { connections: connections(1), key: () => `ioc${n}` })
    const first = connectIo(url)
    await new Promise<void>((r) => first.once('connect', () => r()))
    expect(await emit(first, 'ping')).toEqual(['pong', 'pong'])
    const second = connectIo(url)
    const [frame, reason] = await Promise.all([
      new Promise((r) => second.once('rate_limited', r)),
      new Promise((r) => second.once('disconnect', r)),
    ])
    expect(frame).toEqual({ type: 'rate_limited', retryAfterMs: expect.any(Number) })
    expect(reason).toBe('io server disconnect')
    // the first one's disconnect frees its slot (the release lands just after: bounded retry)
    first.disconnect()
    let again = false
    for (let i = 0; i < 50 && !again; i++) {
      const s = connectIo(url)
      again = await new Promise<boolean>((resolve) => {
        s.once('rate_limited', () => resolve(false))
        s.once('connect', () => emit(s, 'ping').then(([name]) => resolve(name === 'pong')))
      })
    }
    expect(again).toBe(true)
  })
})

describe('TollgateWsGuard without forRoot, and from forRootAsync', () => {
  it('@UseGuards(new TollgateWsGuard(options)) limits that handler; forRootAsync options come from a factory', async () => {
    const own = perDay(1)
    @WebSocketGateway()
    class InstanceGateway {
      @UseGuards(new TollgateWsGuard({ messages: own, key: () => `inst${n}` }))
      @SubscribeMessage('note')
      note() {
        return { event: 'note', data: 'ok' }
      }
    }
    const shared = perDay(1)
    @Module({
      imports: [TollgateWsModule.forRootAsync({ useFactory: async () => ({ messages: shared }) })],
      providers: [InstanceGateway, gatewayFor()],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false })
    app.useWebSocketAdapter(new WsAdapter(app))
    apps.push(app)
    await app.listen(0, '127.0.0.1')
    const c = Client.open(`ws://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`)
    await c.opened
    // 'note': the guard instance's own limiter; 'chat': the module's, from the factory
    expect(await c.send('note')).toEqual({ event: 'note', data: 'ok' })
    expect(await c.send('note')).toEqual(refusal('note'))
    expect(await c.send('chat', { text: 'a' })).toEqual({ event: 'chat', data: 'echo:a' })
    expect(await c.send('chat', { text: 'b' })).toEqual(refusal('chat'))
  })
})

describe('TollgateWsGuard options', () => {
  const bad: [string, unknown, string][] = [
    ['neither limiter', {}, 'connections'],
    ['messages not a limiter', { messages: 3 }, 'messages'],
    ['key not a function', { messages: 'm', key: 'ip' }, 'key'],
    ['a negative cost', { messages: 'm', cost: -1 }, 'cost'],
    ['perConnection naming no policy', { messages: 'm', perConnection: ['nope'] }, 'perConnection'],
  ]
  it.each(bad)('%s: ConfigError naming the option, at construction', (_name, options, option) => {
    const given = { ...(options as Record<string, unknown>) }
    if (given.messages === 'm') given.messages = perDay(1)
    let thrown: unknown
    try {
      TollgateWsModule.forRoot(given as TollgateWsOptions)
    } catch (e) {
      thrown = e
    }
    expect(thrown).toBeInstanceOf(ConfigError)
    expect((thrown as ConfigError).option).toBe(option)
  })
})
