/**
 * How every RedisStore script is sent: EVALSHA, one EVAL after NOSCRIPT, TRYAGAIN retried on a cluster
 * while the caller waits; nothing else is retried, because a failed call may have been applied.
 * @module
 */

import { StoreError } from '../../errors'
import type { Script } from '../../scripts/generated'
import type { ClientGuard, ConnectionWatch } from './connection'
import type { ScriptClient } from './script-client'

// TRYAGAIN (a multi-key call on a slot being migrated, its keys split between the two nodes) is refused
// before the script runs, so resending cannot double-spend. Retried here for both cluster clients (the
// ioredis Cluster's own retries are not used, see ioredis-cluster.ts). 16 x 25 ms stays inside the default deadline.
const TRY_AGAIN_ATTEMPTS = 16
const TRY_AGAIN_DELAY_MS = 25

function errorStarts(error: unknown, prefix: string): boolean {
  const message = (error as { message?: unknown } | null)?.message
  return typeof message === 'string' && message.startsWith(prefix)
}

/**
 * NOSCRIPT by the reply's error code, never its text (Valkey 8 answers `NOSCRIPT No matching script.`):
 * as node-redis, ioredis and iovalkey give the raw reply, or as @upstash/redis's auto-pipeline wraps it
 * (`Command failed: NOSCRIPT …`).
 */
export function isNoScript(error: unknown): boolean {
  return errorStarts(error, 'NOSCRIPT') || errorStarts(error, 'Command failed: NOSCRIPT')
}

/** Sends a store's scripts through its client: one per store. */
export class ScriptRunner {
  constructor(
    private readonly client: ScriptClient,
    private readonly cluster: boolean,
    /** The standalone client's connection watch: nothing is sent while it is not ready. */
    private readonly watch: ConnectionWatch | undefined,
    /** Its abort count stops a TRYAGAIN retry once a caller may have been answered. */
    private readonly guard: ClientGuard | undefined,
    private readonly noScript: (error: unknown) => boolean,
  ) {}

  /**
   * EVALSHA; on NOSCRIPT (restart, failover, SCRIPT FLUSH, a new node) one EVAL, which caches it again.
   * Both are routed by the first key, so on a cluster the EVAL reaches the node that said NOSCRIPT (or,
   * if the slot moved meanwhile, its new owner, which needs the EVAL just as much).
   */
  async run(script: Script, keys: string[], args: string[]): Promise<unknown> {
    const aborts = this.guard?.aborts
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.runOnce(script, keys, args)
      } catch (error) {
        // Retried only while its caller may still be waiting: after a deadline has passed (or the client
        // failed) the caller may have its answer, and a retry then would charge it later.
        if (
          !this.cluster ||
          !errorStarts(error, 'TRYAGAIN') ||
          attempt >= TRY_AGAIN_ATTEMPTS ||
          this.guard?.aborts !== aborts
        ) {
          throw wrap(error, script)
        }
        await new Promise((resolve) => setTimeout(resolve, TRY_AGAIN_DELAY_MS))
      }
    }
  }

  private async runOnce(script: Script, keys: string[], args: string[]): Promise<unknown> {
    // Never into the client's offline queue, at boot included: a queued call outlives the deadline, is
    // answered by the failure policy, and would then be charged when the connection comes (back).
    // (Clusters are not watched: a cluster client as a whole can read "not ready" while one node is
    // down; there the per-node breakers and the deadline decide.)
    const watch = this.watch
    if (watch && !watch.canSend()) {
      throw new StoreError(`${script.name}: the Redis client is not connected (the call was not queued)`)
    }
    let reply: unknown
    try {
      reply = await this.client.evalsha(script.sha1, keys, args)
    } catch (error) {
      if (!this.noScript(error)) throw error
      watch?.answered()
      reply = await this.client.eval(script.source, keys, args)
    }
    watch?.answered()
    return reply
  }
}

function wrap(error: unknown, script: Script): StoreError {
  if (error instanceof StoreError) return error
  const message = (error as { message?: unknown } | null)?.message
  return new StoreError(
    `${script.name} script failed: ${typeof message === 'string' ? message : String(error)}`,
    {
      cause: error,
    },
  )
}
