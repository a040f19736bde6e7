/**
 * `limitHonoWebSocket(options)` for Hono's `upgradeWebSocket` (`@hono/node-ws`, Bun, Deno, Workers):
 * `admit`, a middleware before the upgrade, refuses a connection over its limit with HTTP 429; `events`
 * wraps the events factory so the lease ends on close and every message is counted before `onMessage`.
 * It lives here rather than in `@tollgate/hono` so every WebSocket server shares one gate and one reply.
 * @module
 */
import { ConfigError } from '@tollgate/core'
import type { Context, MiddlewareHandler } from 'hono'
import type { WSContext, WSEvents } from 'hono/ws'
import { type Connection, ConnectionGate } from './gate'
import { type ConnectionInfo, checkGateOptions, type GateOptions } from './options'
import { CLOSE_CODE, type RateLimitedFrame } from './refusal'

export interface LimitHonoWebSocketOptions extends GateOptions {
  /** The identity a connection counts against (for example the authenticated user). */
  key: (c: Context) => string | Promise<string>
  /** Answers a refused message instead of the default reply (`ws.send(JSON.stringify(frame))`). */
  onLimited?: (ws: WSContext, frame: RateLimitedFrame, connection: ConnectionInfo) => void
}

/** What `limitHonoWebSocket` returns. */
export interface HonoWebSocketLimit {
  /** Before `upgradeWebSocket(...)` on the route: over the limit, HTTP 429 with the refusal as JSON. */
  readonly admit: MiddlewareHandler
  /** Wraps the events factory given to `upgradeWebSocket`. */
  events<T>(create: (c: Context) => WSEvents<T> | Promise<WSEvents<T>>): (c: Context) => Promise<WSEvents<T>>
  readonly gate: ConnectionGate
}

interface Admitted {
  connection: Connection
  holder: { ws?: WSContext }
}

/** Throws ConfigError on a bad option (`key` is required: Hono has no one way to read the client address). */
export function limitHonoWebSocket(options: LimitHonoWebSocketOptions): HonoWebSocketLimit {
  checkGateOptions(options, ['key', 'onLimited'])
  if (typeof options.key !== 'function') throw new ConfigError('key', 'a function', options.key, 'type')
  const gate = new ConnectionGate(options)
  const admitted = new WeakMap<Request, Admitted>()

  const admit: MiddlewareHandler = async (c, next) => {
    if (c.req.header('upgrade')?.toLowerCase() !== 'websocket') return next()
    const identity = await options.key(c)
    if (typeof identity !== 'string' || identity === '')
      throw new ConfigError('key', 'a function returning a non-empty string', identity)
    const holder: Admitted['holder'] = {}
    const a = await gate.open(identity, (frame) => holder.ws?.close(CLOSE_CODE, JSON.stringify(frame)))
    if (!a.allowed) {
      const { retryAfterMs } = a.refusal
      if (retryAfterMs !== null) c.header('Retry-After', String(Math.ceil(retryAfterMs / 1000)))
      return c.json(a.refusal, 429)
    }
    admitted.set(c.req.raw, { connection: a.connection, holder })
    // on Node the lease also ends with the TCP connection, should the upgrade never open a socket
    const incoming = (
      c.env as { incoming?: { socket?: { once(e: 'close', f: () => void): void } } } | undefined
    )?.incoming
    incoming?.socket?.once('close', () => void a.connection.close().catch(() => {}))
    try {
      await next()
    } finally {
      // the events factory claims the admission; unclaimed, no socket will hold the lease
      if (admitted.delete(c.req.raw)) await a.connection.close()
    }
  }

  const events: HonoWebSocketLimit['events'] = (create) => async (c) => {
    const inner = await create(c)
    const entry = admitted.get(c.req.raw)
    if (!entry) return inner
    admitted.delete(c.req.raw)
    const { connection, holder } = entry
    let queue: Promise<unknown> = Promise.resolve()
    return {
      ...inner,
      onOpen(evt, ws) {
        holder.ws = ws
        inner.onOpen?.(evt, ws)
      },
      onMessage(evt, ws) {
        // counted in arrival order; only admitted messages reach the handler
        queue = queue.then(async () => {
          let frame: RateLimitedFrame | undefined
          try {
            frame = await connection.message(evt.data)
          } catch {
            return ws.close(1011, 'rate limit error')
          }
          if (!frame) inner.onMessage?.(evt, ws)
          else if (options.onLimited) options.onLimited(ws, frame, connection)
          else ws.send(JSON.stringify(frame))
        })
      },
      onClose(evt, ws) {
        void connection.close().catch(() => {})
        inner.onClose?.(evt, ws)
      },
    }
  }

  return { admit, events, gate }
}
