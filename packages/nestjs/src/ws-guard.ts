/**
 * `TollgateWsGuard` for NestJS gateways (`@nestjs/websockets`, on `@nestjs/platform-ws` or
 * `@nestjs/platform-socket.io`): counts each message a guarded handler receives and, through
 * `connect(client, request)` in `handleConnection`, holds a connection lease for the socket's life. The
 * options and the refusal frame are `@tollgate/websocket`'s, so a gateway answers as its `ws` and
 * Socket.IO integrations do.
 * @module
 */
import { type CanActivate, type ExecutionContext, Inject, Injectable, Logger } from '@nestjs/common'
import { Reflector } from '@nestjs/core'
import { WsException } from '@nestjs/websockets'
import { ConfigError, type Decision, type KeyInput, type RateLimiter } from '@tollgate/core'
import { canonicalIp } from '@tollgate/http'
import {
  type Admission,
  CLOSE_CODE,
  ConnectionGate,
  type Cost,
  type GateOptions,
  type RateLimitedFrame,
  rateLimitedFrame,
} from '@tollgate/websocket'
import { RATE_LIMIT_OPTIONS, SKIP_RATE_LIMIT, type TollgateOptions } from './decorators'

/** Injection token of the options `TollgateWsModule.forRoot()` gives the guard. */
export const TOLLGATE_WS_OPTIONS = 'tollgate:ws-options'

/** A message's data as the handler receives it, or the upgrade request when a connection opens. */
export type WsKeyFunction = (
  client: any,
  data: unknown,
  context: ExecutionContext | undefined,
) => string | Promise<string>

export interface TollgateWsOptions extends Omit<GateOptions, 'cost'> {
  /**
   * The identity connections and messages count against. For a message: the client, the message's data
   * and the handler's context. For a connection (`connect`): the client, what Nest passed after it to
   * `handleConnection` (the upgrade request on `@nestjs/platform-ws`, nothing on Socket.IO, whose
   * `client.handshake` holds it) and no context.
   * @default the client's address, canonical as the HTTP adapters make it (IPv6 grouped by /56)
   */
  key?: WsKeyFunction
  /** Units a message costs: a number, a record by policy name, or computed from the message. @default 1 */
  cost?: Cost | CostFunction
}

/** A message's cost from its data. */
export type CostFunction = (data: unknown, client: any, context: ExecutionContext) => Cost

/** The frame a refused message gets: `@tollgate/websocket`'s, with the handler's message name. */
export interface WsRateLimitedFrame extends RateLimitedFrame {
  event: string
}

/**
 * A refused message. Nest's `BaseWsExceptionFilter` sends its frame as the 'exception' event: on
 * `@nestjs/platform-ws` the text `{"event":"exception","data":{"type":"rate_limited","retryAfterMs":…,"event":…}}`,
 * on Socket.IO an 'exception' event whose argument is the frame. Catch it in a filter to answer your way.
 */
export class RateLimitWsException extends WsException {
  constructor(
    readonly frame: WsRateLimitedFrame,
    readonly decision: Decision | undefined,
  ) {
    super(frame)
  }
}

/** What the limits keep of one client, wherever it is read (any guard instance, `connect`). */
interface ClientState {
  readonly connectionId: string
  /** The default identity, computed once. */
  address?: string
  /** The connection's lease, when `connect` was called. */
  admission?: Promise<Admission>
}
const clients = new WeakMap<object, ClientState>()
const logger = new Logger('TollgateWsGuard')
const stateOf = (client: object): ClientState => {
  let state = clients.get(client)
  if (state === undefined) {
    state = { connectionId: crypto.randomUUID() }
    clients.set(client, state)
  }
  return state
}

/** Socket.IO's socket; otherwise a `ws` WebSocket. */
const isSocketIo = (client: any): boolean =>
  typeof client?.handshake === 'object' && client.handshake !== null

/**
 * The client's address as the HTTP adapters key it. A `ws` socket already torn down has none: 'unknown',
 * as `@tollgate/websocket` keys it.
 */
function addressOf(client: any): string {
  const raw: string | undefined = isSocketIo(client)
    ? client.handshake.address
    : client?._socket?.remoteAddress
  return raw === undefined ? 'unknown' : canonicalIp(raw)
}

function defaultIdentity(client: any, state: ClientState): string {
  if (state.address === undefined) state.address = addressOf(client)
  return state.address
}

function checkIdentity(identity: unknown): string {
  if (typeof identity !== 'string' || identity === '')
    throw new ConfigError('key', 'a function returning a non-empty string', identity)
  return identity
}

type Handler = (...args: unknown[]) => unknown
/** A handler's messages limiter, or null when `@SkipRateLimit()` exempts it. */
type Route = RateLimiter | null

/**
 * Rate-limits gateway messages: `@UseGuards(TollgateWsGuard)` on a gateway or a `@SubscribeMessage()`
 * handler. Each guarded message spends `messages` (per identity, and per connection for the
 * `perConnection` policies); over a limit the handler does not run and the client gets the refusal
 * frame through Nest's exception filter ({@link RateLimitWsException}). `@SkipRateLimit()` exempts a
 * handler or gateway; `@RateLimit({ limiter })` gives one its own messages limiter. `connect(client,
 * request)` in `handleConnection` holds a `connections` lease while the socket is open and closes a
 * refused one (`ws`: code 4429 with the frame as reason; Socket.IO: a 'rate_limited' event, then a
 * disconnect). Other contexts (HTTP, microservices) pass through.
 *
 * @example
 * @WebSocketGateway()
 * class ChatGateway implements OnGatewayConnection {
 *   constructor(private readonly tollgate: TollgateWsGuard) {}
 *   handleConnection(client: WebSocket, request: IncomingMessage) { return this.tollgate.connect(client, request) }
 *   @UseGuards(TollgateWsGuard)
 *   @SubscribeMessage('chat')
 *   chat(@MessageBody() text: string) { return { event: 'chat', data: text } }
 * }
 */
export class TollgateWsGuard implements CanActivate {
  readonly options: TollgateWsOptions
  private readonly gate: ConnectionGate | undefined
  private readonly routes = new WeakMap<Handler, Route>()
  /** The consume options of a fixed cost, made once. */
  private readonly fixedCost: { cost: Cost } | undefined

  /** Throws ConfigError on a bad option. */
  constructor(
    options: TollgateWsOptions,
    private readonly reflector: Reflector = new Reflector(),
  ) {
    const { cost, key, ...gateOptions } = options ?? ({} as TollgateWsOptions)
    // @tollgate/websocket's checks, with this guard's own callbacks
    new ConnectionGate({ ...gateOptions, cost: typeof cost === 'function' ? undefined : cost })
    if (key !== undefined && typeof key !== 'function')
      throw new ConfigError('key', 'a function', key, 'type')
    if (typeof cost === 'function' && !options.messages)
      throw new ConfigError('messages', 'a RateLimiter (cost counts messages)', options.messages, 'type')
    this.options = options
    this.fixedCost = typeof cost === 'function' ? undefined : { cost: cost ?? 1 }
    this.gate = options.connections ? new ConnectionGate({ connections: options.connections }) : undefined
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'ws') return true
    const messages = this.route(context.getClass(), context.getHandler() as Handler)
    const ws = context.switchToWs()
    const client = ws.getClient()
    const state = stateOf(client)
    const event = String(ws.getPattern())
    // a message that came while its connection was being admitted waits for the answer
    if (state.admission) {
      const admission = await state.admission
      if (!admission.allowed)
        throw new RateLimitWsException({ ...admission.refusal, event }, admission.decision)
    }
    if (messages === null) return true
    const data = ws.getData()
    const { key, cost } = this.options
    const identity = key ? checkIdentity(await key(client, data, context)) : defaultIdentity(client, state)
    const spend = this.fixedCost ?? { cost: (cost as CostFunction)(data, client, context) }
    const decision = await messages.consume(this.keyOf(messages, identity, state), spend)
    if (decision.allowed) return true
    throw new RateLimitWsException({ ...rateLimitedFrame(decision), event }, decision)
  }

  /**
   * Call from `handleConnection(client, ...args)` with its arguments: takes the identity's connection
   * lease, ended when the socket closes (however it closed), or closes a refused socket. Resolves true
   * once admitted. Without `connections` it admits every socket. A `key` function that throws closes the
   * socket (`ws`: code 1011) and is logged; it never rejects.
   */
  async connect(client: any, request?: unknown): Promise<boolean> {
    const gate = this.gate
    if (gate === undefined) return true
    const state = stateOf(client)
    if (state.admission) return (await state.admission).allowed
    const socketIo = isSocketIo(client)
    const refuse = (frame: RateLimitedFrame) => {
      if (socketIo) {
        client.emit('rate_limited', frame)
        client.disconnect(true)
      } else client.close(CLOSE_CODE, JSON.stringify(frame))
    }
    let closed = false
    const onClose = () => {
      closed = true
      void state.admission?.then((a) => (a.allowed ? a.connection.close() : undefined)).catch(() => {})
    }
    client.once(socketIo ? 'disconnect' : 'close', onClose)
    state.admission = (async () => {
      const key = this.options.key
      const identity = key
        ? checkIdentity(await key(client, request, undefined))
        : defaultIdentity(client, state)
      return gate.open(identity, refuse)
    })()
    let admission: Admission
    try {
      admission = await state.admission
    } catch (error) {
      // Nest does not await handleConnection: a rejection here would be unhandled (and end the process)
      logger.error(error)
      if (socketIo) client.disconnect(true)
      else client.close(1011, 'rate limiter error')
      return false
    }
    if (!admission.allowed) {
      refuse(admission.refusal)
      return false
    }
    // closed while admission was pending: the listener above already ended the lease
    return !closed
  }

  /**
   * Ends the client's connection lease now (it also ends by itself when the socket closes). Optional in
   * `handleDisconnect`.
   */
  async disconnect(client: any): Promise<void> {
    const admission = await clients.get(client)?.admission?.catch(() => undefined)
    if (admission?.allowed) await admission.connection.close()
  }

  private route(controller: object, handler: Handler): Route {
    let route = this.routes.get(handler)
    if (route === undefined) {
      route = this.build(controller, handler)
      this.routes.set(handler, route)
    }
    return route
  }

  private build(controller: object, handler: Handler): Route {
    const targets = [handler, controller as Handler]
    if (this.reflector.getAllAndOverride<boolean>(SKIP_RATE_LIMIT, targets)) return null
    const own = this.reflector.getAllAndOverride<TollgateOptions | undefined>(RATE_LIMIT_OPTIONS, targets)
    if (own === undefined) return this.options.messages ?? null
    // Only `limiter` means the same on a socket; the other options are HTTP's (requests, headers).
    const other = Object.keys(own).find((name) => name !== 'limiter')
    if (other !== undefined)
      throw new ConfigError(
        `@RateLimit() ${other}`,
        'absent on a gateway handler: only { limiter } applies there (the others are HTTP options)',
        (own as Record<string, unknown>)[other],
      )
    const limiter = own.limiter
    if (typeof limiter !== 'object' || limiter === null)
      throw new ConfigError('@RateLimit() limiter', 'a RateLimiter on a gateway handler', limiter, 'type')
    return limiter
  }

  private keyOf(messages: RateLimiter, identity: string, state: ClientState): KeyInput {
    const perConnection = this.options.perConnection
    if (!perConnection?.length) return identity
    const key: Record<string, string> = {}
    for (const { name } of messages.policies) {
      key[name] = perConnection.includes(name) ? `conn:${state.connectionId}` : identity
    }
    return key
  }
}

// Decorators applied as calls: the package needs no decorator compiler setting to build.
Injectable()(TollgateWsGuard)
Inject(TOLLGATE_WS_OPTIONS)(TollgateWsGuard, undefined, 0)
Inject(Reflector)(TollgateWsGuard, undefined, 1)
