/**
 * Valkey GLIDE (`@valkey/valkey-glide`) `GlideClient` and `GlideClusterClient`, recognised by shape (no
 * import: GLIDE stays the user's dependency). Scripts go through `customCommand` as EVALSHA / EVAL, so
 * NOSCRIPT is recovered by the store like for every other client; on a cluster each is routed to the
 * primary owning its first key (GLIDE follows MOVED and ASK and retries TRYAGAIN itself).
 *
 * GLIDE does not expose its slot map: the store reads CLUSTER SLOTS itself (at start, and again after a
 * failed call) so that a limiter keeps one circuit breaker per primary, as for the other cluster clients.
 *
 * Outage behaviour comes from GLIDE's core, not from events: a command waits (for a reconnect, or behind
 * the in-flight limit) at most the client's `requestTimeout` (250 ms by default), after which it is
 * dropped unwritten and rejected with a `TimeoutError`. So no call of ours can be written after its
 * limiter's deadline as long as `requestTimeout` is not longer than that deadline: a client configured
 * otherwise is warned about once. GLIDE reports errors by rejecting the command only (it is no
 * EventEmitter), so there is no `'error'` event that could end the process.
 * @module
 */

import { monotonicMs } from '../../deadlines'
import { SLOTS } from './cluster-slot'
import type { ScriptClient } from './script-client'

/** The part of a GLIDE client Tollgate uses. */
interface GlideLike {
  customCommand(
    args: string[],
    options?: { route?: { type: 'primarySlotKey'; key: string } | 'randomNode' },
  ): Promise<unknown>
  invokeScript(...args: unknown[]): Promise<unknown>
  invokeScriptWithRoute?: (...args: unknown[]) => Promise<unknown>
  /** GLIDE's own field: the per-request timeout the client was created with (ms). */
  readonly requestTimeout?: number
}

/** Valkey GLIDE's standalone or cluster client, told apart by shape. */
export function isGlideClient(client: any): client is GlideLike {
  return (
    !!client &&
    typeof client.customCommand === 'function' &&
    typeof client.invokeScript === 'function' &&
    typeof client.evalsha !== 'function'
  )
}

/** Only a cluster client can route a script (`invokeScriptWithRoute`). */
export function isGlideCluster(client: GlideLike): boolean {
  return typeof client.invokeScriptWithRoute === 'function'
}

/** GLIDE's default `requestTimeout` (ms), for a client that does not say its own. */
const GLIDE_DEFAULT_REQUEST_TIMEOUT_MS = 250

/** The warning code of a GLIDE client whose requests may outlive a limiter's deadline. */
const TIMEOUT_WARNING = 'WARN_TOLLGATE_GLIDE_REQUEST_TIMEOUT'

const WARNED = new WeakSet<object>()

/**
 * NOSCRIPT as GLIDE reports it: a `RequestError` whose message names the error kind its core derived
 * from the reply's code (`… - NoScriptError: <server text>`), whatever text the server gave; the raw code
 * too, should a version pass the reply on as it came.
 */
export function isGlideNoScript(error: unknown): boolean {
  const message = (error as { message?: unknown } | null)?.message
  if (typeof message !== 'string') return false
  return message.startsWith('NOSCRIPT') || message.includes('NoScriptError: ')
}

/** At most one slot-map refresh per this long, however many calls fail. */
const SLOTS_REFRESH_MS = 1000

const NO_OWNER = 0xffff

export class GlideScriptClient implements ScriptClient {
  readonly cluster: boolean
  /**
   * On a cluster, slot -> index into {@link owners}, from CLUSTER SLOTS: GLIDE keeps its topology to
   * itself, and a limiter keeps one breaker per primary. Read at start, again after a failed call.
   */
  private readonly slotOwner?: Uint16Array
  private owners: string[] = []
  private refreshedAt = -Infinity
  private readonly failed = (error: unknown): never => {
    this.refreshSlots()
    throw error
  }

  constructor(private readonly client: GlideLike) {
    this.cluster = isGlideCluster(client)
    if (this.cluster) {
      this.slotOwner = new Uint16Array(SLOTS).fill(NO_OWNER)
      this.refreshSlots()
    }
  }

  /** The address of the primary that owned `slot` when the map was last read. */
  nodeOf(slot: number): string | undefined {
    const i = this.slotOwner?.[slot]
    return i === undefined || i === NO_OWNER ? undefined : this.owners[i]
  }

  private refreshSlots(): void {
    const now = monotonicMs()
    if (!this.slotOwner || now - this.refreshedAt < SLOTS_REFRESH_MS) return
    this.refreshedAt = now
    let pending: Promise<unknown>
    try {
      pending = this.client.customCommand(['CLUSTER', 'SLOTS'], { route: 'randomNode' })
    } catch {
      return
    }
    pending.then(
      (reply) => {
        if (!Array.isArray(reply)) return
        const owners: string[] = []
        const map = this.slotOwner!
        for (const range of reply) {
          const [start, end, primary] = range as [number, number, [string, number]]
          if (!Array.isArray(primary)) continue
          const address = `${primary[0]}:${primary[1]}`
          let i = owners.indexOf(address)
          if (i < 0) i = owners.push(address) - 1
          map.fill(i, Number(start), Number(end) + 1)
        }
        this.owners = owners
      },
      () => {},
    )
  }

  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown> {
    return this.send('EVALSHA', sha1, keys, args)
  }

  eval(source: string, keys: string[], args: string[]): Promise<unknown> {
    return this.send('EVAL', source, keys, args)
  }

  /**
   * A limiter's deadline. GLIDE has no per-command timeout or abort: the client's `requestTimeout` is
   * what withdraws a command still unwritten, so it must not be longer than the deadline.
   */
  useDeadline(timeoutMs: number): void {
    const requestTimeout = this.client.requestTimeout ?? GLIDE_DEFAULT_REQUEST_TIMEOUT_MS
    if (requestTimeout <= timeoutMs || WARNED.has(this.client)) return
    WARNED.add(this.client)
    console.warn(
      `[tollgate] ${TIMEOUT_WARNING}: the Valkey GLIDE client has requestTimeout ${requestTimeout} ms, ` +
        `longer than the limiter's timeoutMs ${timeoutMs} ms: during an outage a call answered by the ` +
        'failure policy can still be written (and charged) when the connection returns. Give the ' +
        `limiter a client with requestTimeout <= ${timeoutMs}. See docs/failure-modes.md.`,
    )
  }

  private send(command: string, script: string, keys: string[], args: string[]): Promise<unknown> {
    const line = new Array<string>(3 + keys.length + args.length)
    line[0] = command
    line[1] = script
    line[2] = String(keys.length)
    for (let i = 0; i < keys.length; i++) line[3 + i] = keys[i]!
    for (let i = 0; i < args.length; i++) line[3 + keys.length + i] = args[i]!
    if (!this.cluster) return this.client.customCommand(line)
    return this.client
      .customCommand(line, { route: { type: 'primarySlotKey', key: keys[0]! } })
      .then(undefined, this.failed)
  }
}
