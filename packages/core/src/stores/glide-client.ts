/**
 * Valkey GLIDE (`@valkey/valkey-glide`) `GlideClient` and `GlideClusterClient`, recognised by shape (no
 * import: GLIDE stays the user's dependency). Scripts go through `customCommand` as EVALSHA / EVAL, so
 * NOSCRIPT is recovered by the store like for every other client; on a cluster each is routed to the
 * primary owning its first key (GLIDE follows MOVED and ASK and retries TRYAGAIN itself).
 *
 * Outage behaviour comes from GLIDE's core, not from events: a command waits (for a reconnect, or behind
 * the in-flight limit) at most the client's `requestTimeout` (250 ms by default), after which it is
 * dropped unwritten and rejected with a `TimeoutError`. So no call of ours can be written after its
 * limiter's deadline as long as `requestTimeout` is not longer than that deadline: a client configured
 * otherwise is warned about once. GLIDE reports errors by rejecting the command only (it is no
 * EventEmitter), so there is no `'error'` event that could end the process.
 * @module
 */

import type { ScriptClient } from './redis-store'

/** The part of a GLIDE client Tollgate uses. */
interface GlideLike {
  customCommand(
    args: string[],
    options?: { route?: { type: 'primarySlotKey'; key: string } },
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

export class GlideScriptClient implements ScriptClient {
  readonly cluster: boolean

  constructor(private readonly client: GlideLike) {
    this.cluster = isGlideCluster(client)
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
    for (let i = 0; i < keys.length; i++) line[3 + i] = keys[i]
    for (let i = 0; i < args.length; i++) line[3 + keys.length + i] = args[i]
    if (!this.cluster) return this.client.customCommand(line)
    return this.client.customCommand(line, { route: { type: 'primarySlotKey', key: keys[0] } })
  }
}
