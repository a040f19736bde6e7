/**
 * What a limiter reports, for alerting: through the `onEvent` option and through
 * `node:diagnostics_channel` (channel `tollgate:<type>`) where the runtime has it. No metrics library.
 * @module
 */
import type { BreakerState } from './failure'
import type { StoreFault } from './store-fault'

/** Every event a limiter emits. */
export type TollgateEvent =
  | {
      type: 'store-error'
      prefix: string
      error: unknown
      /** `'data'`: about one key's data, not counted by the breaker (see `storeFaultOf`). */
      fault: StoreFault
    }
  | { type: 'timeout'; prefix: string; timeoutMs: number }
  | { type: 'breaker'; prefix: string; state: BreakerState; scope?: string }
  | { type: 'fallback'; prefix: string; policy: 'allow' | 'deny' | 'local'; allowed: boolean }
  | { type: 'cache-hit'; prefix: string }
  /**
   * A store's Redis server can evict Tollgate's counters (a `maxmemory-policy` other than `noeviction`,
   * with `maxmemory` set): an evicted counter admits its identity afresh. Sent by the store (no limiter
   * prefix), once per connection; logged once per client and policy as `WARN_TOLLGATE_EVICTION_POLICY`.
   */
  | { type: 'eviction-policy'; policy: string; maxmemory: number }

export type EventType = TollgateEvent['type']

interface Channel {
  readonly hasSubscribers: boolean
  publish(message: unknown): void
}

// Loaded without a static import so the core stays runtime-neutral (edge workers have no node: modules).
const dc = (() => {
  try {
    const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process
    return proc?.getBuiltinModule?.('node:diagnostics_channel') as
      | { channel(name: string): Channel }
      | undefined
  } catch {
    return undefined
  }
})()

/** The diagnostics channels, by event type (undefined where the runtime has none). */
export const CHANNELS: Partial<Record<EventType, Channel>> = {}
if (dc) {
  for (const type of [
    'store-error',
    'timeout',
    'breaker',
    'fallback',
    'cache-hit',
    'eviction-policy',
  ] as const) {
    CHANNELS[type] = dc.channel(`tollgate:${type}`)
  }
}

/** Publishes an event to the hook and the channel; a throwing hook never breaks a decision. */
export function emit(hook: ((event: TollgateEvent) => void) | undefined, event: TollgateEvent): void {
  const channel = CHANNELS[event.type]
  if (channel?.hasSubscribers) channel.publish(event)
  if (hook) {
    try {
      hook(event)
    } catch {
      // the hook is the user's; a decision must not depend on it
    }
  }
}
