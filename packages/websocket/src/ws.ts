/**
 * `limitWebSocket(options)` for `ws` servers: `verifyClient` refuses a connection over its limit with
 * HTTP 429 before the upgrade; `attach(socket, req)` ties the lease to the socket's life (and refuses
 * with close code 4429 when `verifyClient` was not used) and counts every message before the socket's
 * 'message' listeners see it, in order. A refused message gets a reply, never a silent drop.
 * @module
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import { ConfigError } from '@tollgate/core'
import { canonicalIp } from '@tollgate/http'
import type { WebSocket } from 'ws'
import { type Admission, ConnectionGate } from './gate'
import { type ConnectionInfo, checkGateOptions, type GateOptions } from './options'
import { CLOSE_CODE, type RateLimitedFrame } from './refusal'

export interface LimitWebSocketOptions extends GateOptions {
  /**
   * The identity a connection counts against. @default the client's address (`req.socket.remoteAddress`),
   * canonicalised as the HTTP adapters key it (IPv4-mapped IPv6 as IPv4, IPv6 by its /56)
   */
  key?: (req: IncomingMessage) => string | Promise<string>
  /**
   * Answers a refused message instead of the default reply (`socket.send(JSON.stringify(frame))`).
   * The socket stays open either way unless this closes it.
   */
  onLimited?: (socket: WebSocket, frame: RateLimitedFrame, connection: ConnectionInfo) => void
}

/** What `limitWebSocket` returns. */
export interface WebSocketLimit {
  /** Pass as `new WebSocketServer({ verifyClient })`: over the limit, HTTP 429 instead of the upgrade. */
  verifyClient(
    info: { req: IncomingMessage },
    callback: (ok: boolean, code?: number, message?: string, headers?: OutgoingHttpHeaders) => void,
  ): void
  /**
   * Call first thing in the 'connection' listener. Resolves true once admitted; false when it closed the
   * socket with 4429 (without `verifyClient`, or when the store refused).
   */
  attach(socket: WebSocket, req: IncomingMessage): Promise<boolean>
  /** The neutral limits underneath, for a custom integration. */
  readonly gate: ConnectionGate
}

interface Pending {
  admission: Promise<Admission>
  holder: { socket?: WebSocket }
}

const defaultKey = (req: IncomingMessage) => canonicalIp(req.socket.remoteAddress)

/** Throws ConfigError on a bad option. */
export function limitWebSocket(options: LimitWebSocketOptions): WebSocketLimit {
  checkGateOptions(options, ['key', 'onLimited'])
  const gate = new ConnectionGate(options)
  const key = options.key ?? defaultKey
  // an admission taken in verifyClient waits here for its socket (the same request object)
  const pending = new WeakMap<IncomingMessage, Pending>()

  const admit = (req: IncomingMessage): Pending => {
    const holder: { socket?: WebSocket } = {}
    // a lease lost at renewal closes the socket it belongs to
    const lost = (frame: RateLimitedFrame) => holder.socket?.close(CLOSE_CODE, JSON.stringify(frame))
    const admission = (async () => {
      const identity = await key(req)
      if (typeof identity !== 'string' || identity === '')
        throw new ConfigError('key', 'a function returning a non-empty string', identity)
      return gate.open(identity, lost)
    })()
    return { admission, holder }
  }

  const reply = (socket: WebSocket, frame: RateLimitedFrame, connection: ConnectionInfo) => {
    if (options.onLimited) options.onLimited(socket, frame, connection)
    else if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(frame))
  }

  return {
    gate,
    verifyClient(info, callback) {
      const p = admit(info.req)
      pending.set(info.req, p)
      p.admission.then(
        (a) => {
          if (a.allowed) {
            // the lease ends with the TCP connection too: an upgrade that never reaches attach() holds none
            info.req.socket.once('close', () => void a.connection.close().catch(() => {}))
            return callback(true)
          }
          const body = JSON.stringify(a.refusal)
          const headers: OutgoingHttpHeaders = { 'Content-Type': 'application/json' }
          if (a.refusal.retryAfterMs !== null)
            headers['Retry-After'] = Math.ceil(a.refusal.retryAfterMs / 1000)
          callback(false, 429, body, headers)
        },
        () => callback(false, 500),
      )
    },
    async attach(socket, req) {
      const { admission, holder } = pending.get(req) ?? admit(req)
      holder.socket = socket
      pending.delete(req)
      // messages that arrive while admission is pending queue behind it, in order (a failed admission
      // closes the socket below: the queue drops them)
      let queue: Promise<unknown> = admission.catch(() => undefined)
      const emit = socket.emit.bind(socket)
      socket.emit = ((event: string | symbol, ...args: unknown[]) => {
        if (event !== 'message') return emit(event, ...args)
        queue = queue.then(async () => {
          const a = await admission.catch(() => undefined)
          if (a === undefined || !a.allowed || socket.readyState !== socket.OPEN) return
          let frame: RateLimitedFrame | undefined
          try {
            frame = await a.connection.message(args[0])
          } catch {
            // a cost that cannot be charged (a bad cost function's answer): refused, never let through
            return socket.close(1011, 'rate limit error')
          }
          if (frame) reply(socket, frame, a.connection)
          else emit(event, ...args)
        })
        return true
      }) as typeof socket.emit
      let a: Admission
      try {
        a = await admission
      } catch (error) {
        // the app's `key` threw (or the address is unreadable): refused, never let through; not rethrown,
        // since attach() is called from a 'connection' listener, where a rejection would end the process
        socket.close(1011, 'rate limiter error')
        console.error(`tollgate: a WebSocket connection was refused: ${(error as Error).message ?? error}`)
        return false
      }
      if (!a.allowed) {
        socket.close(CLOSE_CODE, JSON.stringify(a.refusal))
        return false
      }
      const { connection } = a
      if (socket.readyState === socket.CLOSING || socket.readyState === socket.CLOSED) {
        await connection.close()
        return true
      }
      socket.once('close', () => void connection.close().catch(() => {}))
      return true
    },
  }
}
