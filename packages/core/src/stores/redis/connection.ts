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
 * And for every node-redis and ioredis client, standalone or cluster ({@link guardClient}): an `'error'`
 * listener of Tollgate's own, so a lost connection takes the failure policy and never the process, and
 * (node-redis) a {@link WriteFence} that withdraws commands not yet written once their caller may have
 * been answered.
 *
 * See docs/failure-modes.md.
 * @module
 */

import { monotonicMs } from '../../deadlines'
import { StoreError } from '../../errors'
import { emit, type TollgateEvent } from '../../events'
import * as generated from '../../scripts/generated'

/** What the watch needs from one client family (clients.ts). */
export interface ClientHooks {
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
      // a client that cannot be recycled is left as it is: the breaker bounds what is sent
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

// ---- boot: calls made before the client's first connection wait for it -------------------------------

/** What the boot gate needs from one client family (clients.ts). */
export interface BootHooks {
  /** Whether the client is connected and ready now. */
  isReady(): boolean
  /** Subscribes to the event the client emits once ready. */
  onReady(listener: () => void): void
  /** Starts a lazy client that was never connected. */
  kick?(): void
}

/** The warning code of calls that fell to the failure policy before the client ever connected. */
const BOOT_WARNING = 'WARN_TOLLGATE_NOT_READY_AT_BOOT'

/** A call waiting for the first connection: resolved on 'ready', rejected at its deadline. */
class BootWaiter {
  constructor(
    readonly deadline: number,
    readonly resolve: () => void,
    readonly reject: (error: unknown) => void,
  ) {}
}

/**
 * A client's state until its first connection, shared by every store on that client. A client created
 * and used at once (a cold start, `connect()` not awaited, ioredis connecting by itself) is not ready
 * yet: without this, every call of the first burst would take the failure policy. Until the client has
 * been ready once, a call waits for its 'ready' event, never longer than its deadline (one timer for all
 * waiting calls, none per call), and is then sent; never through the client's offline queue. Once the
 * client has been ready, it is never waited for again: an outage is answered by the failure policy at once.
 */
export class BootGate {
  /** True until the client has been ready once. Read on every call: nothing else is. */
  booting: boolean
  private waiters: BootWaiter[] = []
  private timer: ReturnType<typeof setTimeout> | undefined
  private timerAt = Number.POSITIVE_INFINITY
  private warned = false

  constructor(private readonly client: BootHooks) {
    this.booting = !client.isReady()
    if (this.booting) client.onReady(() => this.opened())
  }

  /**
   * Undefined when the client is ready now (send at once); else a promise that resolves once it is, or
   * rejects with a StoreError after `maxMs`.
   */
  wait(maxMs: number): Promise<void> | undefined {
    if (!this.booting || this.client.isReady()) {
      this.opened()
      return undefined
    }
    this.client.kick?.()
    const deadline = monotonicMs() + maxMs
    return new Promise<void>((resolve, reject) => {
      this.waiters.push(new BootWaiter(deadline, resolve, reject))
      if (deadline < this.timerAt) this.arm(deadline)
    })
  }

  private opened(): void {
    if (!this.booting) return
    this.booting = false
    this.disarm()
    const waiters = this.waiters
    this.waiters = []
    const now = monotonicMs()
    // A waiter past its deadline (its timer not run yet) may have had its caller answered: never sent.
    for (const w of waiters) {
      if (w.deadline > now) w.resolve()
      else w.reject(this.notReady())
    }
  }

  private arm(at: number): void {
    this.disarm()
    this.timerAt = at
    // Not unref'd: a caller awaits each waiting call, and a process with nothing else to do (a script
    // whose client never connects) must still get its answer, at the deadline, rather than exit silently.
    this.timer = setTimeout(() => this.expire(), Math.max(0, at - monotonicMs()))
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.timerAt = Number.POSITIVE_INFINITY
  }

  private expire(): void {
    this.timer = undefined
    this.timerAt = Number.POSITIVE_INFINITY
    const now = monotonicMs()
    const live: BootWaiter[] = []
    let next = Number.POSITIVE_INFINITY
    let expired = false
    for (const w of this.waiters) {
      if (w.deadline <= now) {
        expired = true
        w.reject(this.notReady())
      } else {
        live.push(w)
        if (w.deadline < next) next = w.deadline
      }
    }
    this.waiters = live
    if (live.length > 0) this.arm(next)
    if (expired && !this.warned) {
      this.warned = true
      console.warn(
        `[tollgate] ${BOOT_WARNING}: the Redis client has not connected since it was created; calls ` +
          "made meanwhile took the failure policy at their deadline. Check the client's URL and that " +
          'connect() is called. See docs/failure-modes.md.',
      )
    }
  }

  private notReady(): StoreError {
    return new StoreError(
      'the Redis client has not connected yet: the call waited for its first connection until its ' +
        'deadline (it was not queued)',
    )
  }
}

const GATES = new WeakMap<object, BootGate>()

/** The boot gate of a client, created on first use (one per client however many stores share it). */
export function bootGateOf(client: object, hooks: () => BootHooks): BootGate {
  let gate = GATES.get(client)
  if (!gate) {
    gate = new BootGate(hooks())
    GATES.set(client, gate)
  }
  return gate
}

// ---- ioredis: nothing of ours is resent after a reconnect ----------------------------------------------

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

// ---- every client: errors never crash the process; nothing unwritten outlives its caller's answer -------

/**
 * Commands Tollgate handed to a node-redis client (or cluster) that it may not have written yet. node-redis
 * keeps a command it has not written when the connection drops (its offline queue) and writes it after the
 * reconnect; a command stuck behind backpressure is written whenever the socket drains. Either can outlive
 * the limiter's deadline, so its caller is answered by the failure policy and then charged. Every command
 * carries the `abortSignal` of a small generation; {@link abort} fires all of them when a caller may have
 * been answered without its command's reply (the client reported an error, or a call passed its deadline):
 * node-redis then drops what it has not written (rejecting it with an AbortError), and ignores the signal
 * of what it has (written: its outcome is the reply's, or unknown if that is lost, never resent).
 */
export class WriteFence {
  private current: Generation | undefined
  /** Generations with a command still pending (and the current one). */
  private readonly live = new Set<Generation>()

  constructor(private readonly open: (signal: AbortSignal) => unknown) {}

  /** The generation the next command joins; pass it to {@link done} once that command settles. */
  take(): Generation {
    let g = this.current
    if (g === undefined || g.sent >= GENERATION_SIZE) {
      const controller = new AbortController()
      g = { controller, client: this.open(controller.signal), sent: 0, pending: 0 }
      this.current = g
      this.live.add(g)
    }
    g.sent++
    g.pending++
    return g
  }

  done(g: Generation): void {
    if (--g.pending === 0 && g !== this.current) this.live.delete(g)
  }

  /** Withdraws every command not yet written; commands sent from now on join a new generation. */
  abort(): void {
    if (this.live.size === 0) return
    const live = [...this.live]
    this.live.clear()
    this.current = undefined
    for (const g of live) g.controller.abort()
  }
}

/**
 * Commands per generation. Each holds one abort listener while unwritten, and Node walks a signal's
 * listeners on every add (and warns past 10): a burst of unbatched calls stays linear.
 */
const GENERATION_SIZE = 8

/** One abort signal shared by a few commands, and the client view that sends with it. */
export interface Generation {
  readonly controller: AbortController
  readonly client: any
  sent: number
  pending: number
}

/** What a store learns from its client's own events. */
export interface ClientGuard {
  /** node-redis only: the fence its commands go through. */
  readonly fence: WriteFence | undefined
  /**
   * How many times a caller may have been answered without its command's reply (a client error, a call
   * past its deadline): a store retrying a command (TRYAGAIN) stops when this changed since it began.
   */
  readonly aborts: number
  /** A caller may have been answered without its reply: withdraws what the client has not written. */
  abort(): void
  /** Adds a store's `onEvent` hook (a set: the same hook twice is called once). */
  listen(hook: ((event: TollgateEvent) => void) | undefined): void
}

const GUARDS = new WeakMap<object, ClientGuard>()

/**
 * Installs, once per client object, Tollgate's own `'error'` listener (node-redis client and cluster,
 * ioredis client and Cluster): an `'error'` event nobody listens to would throw and end the process, so
 * an app whose client has no listener of its own would die on the first lost connection. The user's
 * listeners are left as they are; ours forwards each error as a `connection-error` event. For node-redis,
 * an error (and `'node-error'` on a cluster) also withdraws the commands not yet written (see
 * {@link WriteFence}): the client emits it before failing the commands in flight, so a command of the
 * dropped connection is never written on the next one.
 */
export function guardClient(client: any, open: ((signal: AbortSignal) => unknown) | undefined): ClientGuard {
  let guard = GUARDS.get(client)
  if (guard) return guard
  const fence = open ? new WriteFence(open) : undefined
  const hooks = new Set<(event: TollgateEvent) => void>()
  let quiet = false
  const onError = (error: unknown) => {
    guard!.abort()
    const event: TollgateEvent = { type: 'connection-error', error }
    emit(undefined, event)
    // Alone on the event, ours would hide every error: say once per outage what is going on.
    if (!quiet && typeof client.listenerCount === 'function' && client.listenerCount('error') === 1) {
      quiet = true
      console.warn(
        `[tollgate] the Redis client reported an error (${messageOf(error)}); calls take the failure ` +
          "policy until it reconnects. Add an 'error' listener to the client to log these yourself.",
      )
    }
    for (const hook of hooks) {
      try {
        hook(event)
      } catch {
        // the hook is the user's
      }
    }
  }
  if (typeof client.on === 'function') {
    client.on('error', onError)
    if (fence) client.on('node-error', onError)
    client.on('ready', () => {
      quiet = false
    })
  }
  guard = {
    fence,
    aborts: 0,
    abort() {
      ;(this as { aborts: number }).aborts++
      fence?.abort()
    },
    listen: (hook) => {
      if (hook) hooks.add(hook)
    },
  }
  GUARDS.set(client, guard)
  return guard
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message
  return typeof message === 'string' ? message : String(error)
}
