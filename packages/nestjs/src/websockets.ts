/**
 * `@tollgate/nestjs/websockets`: rate limits for NestJS gateways (`@nestjs/websockets` on the `ws` or
 * the Socket.IO platform), with `@tollgate/websocket`'s options and refusal frame. A subpath of its own,
 * so the main entry does not need `@nestjs/websockets`. This file only re-exports.
 * @module
 */

export type { Cost, RateLimitedFrame } from '@tollgate/websocket'
export { CLOSE_CODE } from '@tollgate/websocket'
export {
  type CostFunction,
  RateLimitWsException,
  TOLLGATE_WS_OPTIONS,
  TollgateWsGuard,
  type TollgateWsOptions,
  type WsKeyFunction,
  type WsRateLimitedFrame,
} from './ws-guard'
export { TollgateWsModule, type TollgateWsModuleAsyncOptions } from './ws-module'
