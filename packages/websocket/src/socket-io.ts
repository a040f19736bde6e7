/**
 * `socketIoRateLimit(options)` for Socket.IO 4 servers: as `io.use()` middleware it admits a connection
 * under its identity's limit (else `connect_error` with the refusal in `err.data`), holds the lease until
 * 'disconnect', and counts every incoming event; `limit.event(socket, handler)` counts one event only.
 * A refused event gets the reply frame (through its acknowledgement when it has one, else as a
 * 'rate_limited' event), never a silent drop.
 * @module
 */
import { ConfigError } from '@tollgate/core'
import { canonicalIp } from '@tollgate/http'
import type { Socket } from 'socket.io'
import { type Connection, ConnectionGate } from './gate'
import { type ConnectionInfo, type Cost, checkGateOptions, type GateOptions } from './options'
import type { RateLimitedFrame } from './refusal'

export interface SocketIoRateLimitOptions extends GateOptions {
  /**
   * The identity a connection counts against. @default the client's address (`socket.handshake.address`),
   * canonicalised as the HTTP adapters key it (IPv4-mapped IPv6 as IPv4, IPv6 by its /56)
   */
  key?: (socket: Socket) => string | Promise<string>
  /** Count every incoming event (`socket.use`); false counts only handlers wrapped by `event()`. @default true */
  everyEvent?: boolean
  /** Answers a refused event instead of the default reply; the socket stays connected unless this ends it. */
  onLimited?: (
    socket: Socket,
    frame: RateLimitedFrame & { event: string },
    connection: ConnectionInfo,
  ) => void
}

type Next = (err?: Error) => void

/** The middleware, with the per-event wrapper. */
export interface SocketIoRateLimit {
  (socket: Socket, next: Next): void
  /**
   * Wraps the handler of event `name`: it runs only when the event is within the limit (`cost` as the
   * option, for this event). Use on sockets that passed the middleware, with `everyEvent: false`.
   */
  event<A extends unknown[]>(
    socket: Socket,
    name: string,
    handler: (...args: A) => unknown,
    options?: { cost?: GateOptions['cost'] },
  ): (...args: A) => void
  readonly gate: ConnectionGate
}

/** The error a refused connection's client gets as `connect_error`: `err.data` is the frame. */
export class ConnectionRefusedError extends Error {
  constructor(readonly data: RateLimitedFrame) {
    super('rate_limited')
  }
}

/** Throws ConfigError on a bad option. */
export function socketIoRateLimit(options: SocketIoRateLimitOptions): SocketIoRateLimit {
  checkGateOptions(options, ['key', 'onLimited'])
  if (options.everyEvent !== undefined && typeof options.everyEvent !== 'boolean')
    throw new ConfigError('everyEvent', 'a boolean', options.everyEvent, 'type')
  const gate = new ConnectionGate(options)
  const key = options.key ?? ((socket: Socket) => canonicalIp(socket.handshake.address))
  const open = new WeakMap<Socket, Connection>()

  const reply = (socket: Socket, event: string, args: unknown[], frame: RateLimitedFrame, c: Connection) => {
    const answer = { ...frame, event }
    if (options.onLimited) return options.onLimited(socket, answer, c)
    const ack = args[args.length - 1]
    if (typeof ack === 'function') ack(answer)
    else socket.emit('rate_limited', answer)
  }

  // a message's cost from the event's arguments (the event name is the first thing a cost function sees)
  const charge = async (c: Connection, event: string, args: unknown[], cost?: GateOptions['cost']) => {
    const data = { event, args }
    if (cost === undefined) return c.message(data)
    const spend: Cost = typeof cost === 'function' ? cost(data, c) : cost
    return c.message(data, spend)
  }

  const middleware = ((socket: Socket, next: Next) => {
    ;(async () => {
      const identity = await key(socket)
      if (typeof identity !== 'string' || identity === '')
        throw new ConfigError('key', 'a function returning a non-empty string', identity)
      const a = await gate.open(identity, (frame) => {
        socket.emit('rate_limited', frame)
        socket.disconnect(true)
      })
      if (!a.allowed) return next(new ConnectionRefusedError(a.refusal))
      const c = a.connection
      open.set(socket, c)
      socket.once('disconnect', () => void c.close().catch(() => {}))
      if (options.messages && options.everyEvent !== false) {
        socket.use(([event, ...args], go) => {
          charge(c, String(event), args).then(
            (frame) => (frame ? reply(socket, String(event), args, frame, c) : go()),
            () => socket.disconnect(true), // a cost that cannot be charged: refused, never let through
          )
        })
      }
      next()
    })().catch((error: Error) => next(error))
  }) as SocketIoRateLimit

  middleware.event = (socket, name, handler, eventOptions) => {
    return (...args) => {
      const c = open.get(socket)
      if (!c) return void handler(...args)
      charge(c, name, args, eventOptions?.cost).then(
        (frame) => (frame ? reply(socket, name, args, frame, c) : void handler(...args)),
        () => socket.disconnect(true),
      )
    }
  }
  Object.defineProperty(middleware, 'gate', { value: gate })
  return middleware
}
