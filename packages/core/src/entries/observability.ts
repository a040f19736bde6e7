/**
 * `@tollgate/core/observability`: what a metrics exporter (`@tollgate/prometheus`,
 * `@tollgate/opentelemetry`, or your own) needs besides `CHANNEL_NAMES` (main entry): the channel message
 * types, the per-policy outcome and store-error classification the collectors share, and a label memo.
 * This file only re-exports, by name.
 * @module
 */

export {
  CHANNELS_AVAILABLE,
  type DecisionMessage,
  type EventType,
  eachPolicyOutcome,
  type PolicyOutcome,
  type StoreCallContext,
  type StoreErrorKind,
  storeErrorKind,
  type WaitMessage,
} from '../events'
export { LabelCache } from '../label-cache'
