/**
 * One client's connection as Tollgate sees it, shared by every RedisStore built on that client:
 *
 * - whether a call may be sent now: only while the client is ready, so no call ever waits in the
 *   client's offline queue to be applied after the failure policy has answered it (at boot too);
 * - when the client last became ready, so a breaker opened by the outage probes at once on reconnect;
 * - a connection that stopped answering while the client says it is ready (consecutive deadlines passed,
 *   no reply in between): dropped, so the client reconnects instead of waiting for TCP to give up;
 * - the server's eviction policy, checked once per connection (one `CONFIG GET`, never on a request).
 *
 * See docs/failure-modes.md.
 * @module
 */
import { emit, type TollgateEvent } from '../events'
import { monotonicMs } from '../failure'
import * as generated from '../scripts/generated'

/** What the watch needs from one client family. */
interface ClientHooks {
  /** Whether a command sent now is written at once (not queued). */
  isReady(): boolean
  /** Connects a lazy client that was never connected (ioredis `lazyConnect`); we will not queue into it. */
  kick?(): void
  /** Drops the current connection so the client reconnects now; in-flight commands fail. */
  recycle(): void
  /** `CONFIG GET maxmemory*` as name → value. */
  config(): Promise<Record<string, string>>
  /** Subscribes to the client's 'ready' event. */
  onReady(listener: () => void): void
}

/**
 * Consecutive deadlines passed while the client said it was ready, with no reply in between, before the
 * connection is taken for dead and dropped. A server that is only slow (a long script, `CLIENT PAUSE`)
 * answers something within three deadlines far more often than not; one that never answers costs three
 * deadlines, then a reconnect.
 */
const STALL_TIMEOUTS = 3

/** The event and warning code of an evicting server. */
const EVICTION_WARNING = 'WARN_TOLLGATE_EVICTION_POLICY'

/** Readiness of a client, -1 while it is not ready (see {@link ConnectionWatch.readySince}). */
const NOT_READY = -1

/** Per-client state shared by the stores on that client. */
export class ConnectionWatch {
  private since: number
  private ready: boolean
  private timeouts = 0
  private readonly hooks = new Set<(event: TollgateEvent) => void>()
  private readonly warned = new Set<string>()

  constructor(private readonly client: ClientHooks) {
    this.ready = client.isReady()
    this.since = this.ready ? monotonicMs() : NOT_READY
    client.onReady(() => this.becameReady())
    if (this.ready) this.checkEviction()
  }

  /** Adds a store's `onEvent` hook (a set: the same hook twice is called once). */
  listen(hook: ((event: TollgateEvent) => void) | undefined): void {
    if (hook) this.hooks.add(hook)
  }

  /** Whether a call may be sent now. A lazy client is started, but the call is not queued into it. */
  canSend(): boolean {
    if (this.client.isReady()) return true
    this.client.kick?.()
    return false
  }

  /**
   * Monotonic ms at which the client last became ready, or {@link NOT_READY} while it is not. Read
   * only by an open breaker, so it also notices a reconnect whose 'ready' event has not run yet.
   */
  readySince(): number {
    if (!this.client.isReady()) {
      this.ready = false
      this.client.kick?.()
      return NOT_READY
    }
    if (!this.ready) {
      this.ready = true
      this.since = monotonicMs()
    }
    return this.since
  }

  /** A reply came back: the connection is alive. */
  answered(): void {
    this.timeouts = 0
  }

  /**
   * A call passed its deadline. After {@link STALL_TIMEOUTS} in a row while the client says it is ready,
   * the connection is dropped: the client reconnects (new connections may work when an established one
   * went half-open), and the calls it held fail at once instead of waiting for TCP to give up.
   */
  timedOut(): void {
    if (!this.client.isReady()) return
    if (++this.timeouts < STALL_TIMEOUTS) return
    this.timeouts = 0
    this.ready = false
    try {
      this.client.recycle()
    } catch {
      // a client that cannot be recycled keeps today's behaviour: the breaker bounds what is sent
    }
  }

  private becameReady(): void {
    this.ready = true
    this.timeouts = 0
    this.since = monotonicMs()
    this.checkEviction()
  }

  /**
   * One `CONFIG GET maxmemory*` per connection. Every Tollgate key has a TTL, so `volatile-*` policies
   * evict them as readily as `allkeys-*`: only `noeviction` (or no `maxmemory`) keeps spent counters.
   * A server that refuses CONFIG (managed Redis, ACLs, a renamed command) is not warned about.
   */
  private checkEviction(): void {
    let pending: Promise<Record<string, string>>
    try {
      pending = this.client.config()
    } catch {
      return
    }
    pending.then(
      (config) => {
        const policy = config['maxmemory-policy']
        const maxmemory = Number(config.maxmemory ?? 0)
        if (!policy || policy === 'noeviction' || !(maxmemory > 0)) return
        const event: TollgateEvent = { type: 'eviction-policy', policy, maxmemory }
        emit(undefined, event) // the diagnostics channel, once
        for (const hook of this.hooks) {
          try {
            hook(event)
          } catch {
            // the hook is the user's
          }
        }
        if (this.warned.has(policy)) return
        this.warned.add(policy)
        console.warn(
          `[tollgate] ${EVICTION_WARNING}: the Redis server has maxmemory-policy ${policy} ` +
            `(maxmemory ${maxmemory} bytes): when memory fills it evicts rate-limit counters, and an ` +
            'evicted counter admits its identity afresh. Use maxmemory-policy noeviction (over-full ' +
            'writes then fail and take the failure policy), or a Redis of its own. See docs/failure-modes.md.',
        )
      },
      () => {},
    )
  }
}

const WATCHES = new WeakMap<object, ConnectionWatch>()

/** The watch of a client, created on first use (one per client however many stores share it). */
export function watchOf(client: object, hooks: () => ClientHooks): ConnectionWatch {
  let watch = WATCHES.get(client)
  if (!watch) {
    watch = new ConnectionWatch(hooks())
    WATCHES.set(client, watch)
  }
  return watch
}

// ---- client families ---------------------------------------------------------------------------------

/** CONFIG GET replies: a flat [name, value, ...] array (RESP2, ioredis) or a map/object (RESP3). */
function configRecord(reply: unknown): Record<string, string> {
  const out: Record<string, string> = {}
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = String(reply[i + 1])
  } else if (reply instanceof Map) {
    for (const [k, v] of reply) out[String(k)] = String(v)
  } else if (reply && typeof reply === 'object') {
    for (const [k, v] of Object.entries(reply)) out[k] = String(v)
  }
  return out
}

/** node-redis v6 (a standalone client; clusters are not watched). */
export function nodeRedisHooks(client: any): ClientHooks {
  return {
    isReady: () => client.isReady === true,
    recycle: () => {
      // No public way to drop only the socket: destroy() rejects every queued and in-flight command and
      // closes; connect() opens a fresh connection (a restart of the client, see docs/failure-modes.md).
      client.destroy()
      client.connect().catch(() => {})
    },
    config: async () => configRecord(await client.sendCommand(['CONFIG', 'GET', 'maxmemory*'])),
    onReady: (listener) => client.on('ready', listener),
  }
}

// Every Tollgate script, to recognise our commands in ioredis' queues.
let OURS: Set<string> | undefined
function isOurs(command: { name?: string; args?: unknown[] } | undefined): boolean {
  if (!command || (command.name !== 'evalsha' && command.name !== 'eval')) return false
  if (!OURS) {
    OURS = new Set()
    for (const s of Object.values(generated)) {
      if (s && typeof s === 'object' && 'sha1' in s && 'source' in s) {
        OURS.add((s as generated.Script).sha1)
        OURS.add((s as generated.Script).source)
      }
    }
  }
  return OURS.has(String(command.args?.[0]))
}

interface Queue {
  length: number
  peekAt(i: number): { command?: { name?: string; args?: unknown[]; reject(e: unknown): void } } | undefined
  removeOne(i: number): unknown
}

/** Rejects and removes our commands from an ioredis queue so the reconnect cannot send them again. */
function dropOurs(queue: Queue | null | undefined): void {
  if (!queue || typeof queue.peekAt !== 'function' || typeof queue.removeOne !== 'function') return
  for (let i = 0; i < queue.length; ) {
    const command = queue.peekAt(i)?.command
    if (isOurs(command)) {
      queue.removeOne(i)
      command!.reject(
        new Error('the connection closed with this call in flight; not resent (outcome unknown)'),
      )
    } else {
      i++
    }
  }
}

/** ioredis (a standalone client; clusters are not watched). */
export function ioredisHooks(client: any): ClientHooks {
  return {
    isReady: () => client.status === 'ready',
    kick: () => {
      if (client.status === 'wait') client.connect().catch(() => {})
    },
    recycle: () => {
      // disconnect(true) ends the socket gracefully and waits for the peer (2 s by default): on a
      // connection that went silent, destroying the stream is what makes ioredis reconnect now.
      if (client.stream && typeof client.stream.destroy === 'function') client.stream.destroy()
      else client.disconnect(true)
    },
    config: async () => configRecord(await client.config('GET', 'maxmemory*')),
    onReady: (listener) => client.on('ready', listener),
  }
}

/**
 * ioredis resends the commands in flight when a connection closes (`autoResendUnfulfilledCommands`,
 * on by default) and writes its offline queue after reconnecting: a Tollgate call answered by the failure
 * policy meanwhile would then be charged. On 'close' (emitted after ioredis has moved the in-flight
 * commands aside and before it reconnects), our commands are taken out of both queues and rejected; the
 * user's other commands are left as they are.
 */
export function dropResendsOnClose(client: any): void {
  client.on('close', () => {
    dropOurs(client.prevCommandQueue)
    dropOurs(client.offlineQueue)
  })
}
