/**
 * `@tollgate/websocket`: connections per identity (a concurrency lease held while the socket is open) and
 * messages per connection and per identity, for `ws` and Socket.IO, over one neutral gate.
 * @module
 */
export { type Admission, type Connection, ConnectionGate } from './gate'
export { type HonoWebSocketLimit, type LimitHonoWebSocketOptions, limitHonoWebSocket } from './hono'
export type { ConnectionInfo, Cost, GateOptions } from './options'
export { CLOSE_CODE, type RateLimitedFrame, rateLimitedFrame } from './refusal'
export {
  ConnectionRefusedError,
  type SocketIoRateLimit,
  type SocketIoRateLimitOptions,
  socketIoRateLimit,
} from './socket-io'
export { type LimitWebSocketOptions, limitWebSocket, type WebSocketLimit } from './ws'
