/**
 * The store of record: every call is one EVALSHA of a generated script (EVAL only after NOSCRIPT, and
 * nothing else retried, because a failed call may have been applied). Accepts node-redis v6 clients,
 * ioredis clients, or anything implementing the two-method {@link ScriptClient} seam.
 * @module
 */

import { ConfigError, StoreError } from '../errors'
import { BY_ALGORITHM, CONSUME, PEEK, REFUND, RESET, type Script } from '../scripts/generated'
import type { Algorithm, ResolvedPolicy, Store, StoreEntry, StoreReply, StoreResult } from '../types'

/**
 * The only two commands Tollgate needs. Implement it to use any client (Valkey GLIDE, an HTTP Redis, a
 * Python sidecar...). Errors must be thrown with the server's message (Tollgate looks for `NOSCRIPT`).
 *
 * @example
 * const store = new RedisStore({
 *   evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
 *   eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
 * })
 */
export interface ScriptClient {
  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown>
  eval(source: string, keys: string[], args: string[]): Promise<unknown>
}

/** Which client family a store was given (for diagnostics). */
export type ClientKind = 'node-redis' | 'ioredis' | 'custom'

const ALG_CODE: Record<Algorithm, number> = {
  'fixed-window': 1,
  'sliding-window': 2,
  'sliding-log': 3,
  'token-bucket': 4,
  gcra: 5,
}

function adapt(input: any): { kind: ClientKind; run: ScriptClient } {
  let client = input
  if (client && typeof client.defineCommand === 'function' && typeof client.evalsha === 'function') {
    return {
      kind: 'ioredis',
      run: {
        evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
        eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
      },
    }
  }
  if (client && typeof client.evalSha === 'function' && typeof client.eval === 'function') {
    // node-redis v6: client, cluster (routed by the first key) and pool all share this API. Its default
    // 5 s per-command timeout arms an AbortSignal per command; Tollgate's own deadline covers our calls.
    if (typeof client.withCommandOptions === 'function') client = client.withCommandOptions({ timeout: 0 })
    return {
      kind: 'node-redis',
      run: {
        evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
        eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
      },
    }
  }
  if (client && typeof client.evalsha === 'function' && typeof client.eval === 'function') {
    return { kind: 'custom', run: client as ScriptClient }
  }
  throw new ConfigError(
    'store client',
    'a node-redis v6 client or cluster, an ioredis client or cluster, or an object with evalsha(sha, keys, args) and eval(source, keys, args)',
    client,
    'type',
  )
}

function isNoScript(error: unknown): boolean {
  const message = (error as { message?: unknown } | null)?.message
  return typeof message === 'string' && message.startsWith('NOSCRIPT')
}

/**
 * @example
 * const redis = await createClient({ url: process.env.REDIS_URL }).on('error', console.error).connect()
 * const store = new RedisStore(redis)
 */
export class RedisStore implements Store {
  readonly kind: ClientKind
  private readonly client: ScriptClient

  constructor(client: unknown) {
    const adapted = adapt(client)
    this.kind = adapted.kind
    this.client = adapted.run
  }

  async consume(entries: readonly StoreEntry[], cost: number): Promise<StoreReply> {
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.consume ?? CONSUME
    return parseReply(await this.run(script, keysOf(entries), checkArgs(entries, cost)), entries.length)
  }

  async peek(entries: readonly StoreEntry[], cost: number): Promise<StoreReply> {
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.peek ?? PEEK
    return parseReply(await this.run(script, keysOf(entries), checkArgs(entries, cost)), entries.length)
  }

  async refund(entries: readonly StoreEntry[], tags: readonly number[], cost: number): Promise<number> {
    const args = [String(cost)]
    entries.forEach((e, i) => {
      args.push(...policyArgs(e.policy), String(tags[i]))
    })
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.refund ?? REFUND
    return Number(await this.run(script, keysOf(entries), args))
  }

  async reset(entries: readonly StoreEntry[]): Promise<void> {
    await this.run(RESET, keysOf(entries), [])
  }

  /** EVALSHA; on NOSCRIPT (restart, failover, SCRIPT FLUSH, a new node) one EVAL, which caches it again. */
  private async run(script: Script, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await this.client.evalsha(script.sha1, keys, args)
    } catch (error) {
      if (!isNoScript(error)) throw wrap(error, script)
      try {
        return await this.client.eval(script.source, keys, args)
      } catch (second) {
        throw wrap(second, script)
      }
    }
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

/** The algorithm code every entry shares, or 0 when they mix (then the general script runs). */
function sharedAlgorithm(entries: readonly StoreEntry[]): number {
  const code = ALG_CODE[entries[0].policy.algorithm]
  for (let i = 1; i < entries.length; i++) if (ALG_CODE[entries[i].policy.algorithm] !== code) return 0
  return code
}

function keysOf(entries: readonly StoreEntry[]): string[] {
  const keys = new Array<string>(entries.length)
  for (let i = 0; i < entries.length; i++) keys[i] = entries[i].key
  return keys
}

// A policy's four ARGV strings never change: build them once per policy, not per call.
const POLICY_ARGS = new WeakMap<ResolvedPolicy, readonly string[]>()

function policyArgs(p: ResolvedPolicy): readonly string[] {
  let args = POLICY_ARGS.get(p)
  if (!args) {
    args = [String(ALG_CODE[p.algorithm]), String(p.limit), String(p.windowMs), String(p.burst)]
    POLICY_ARGS.set(p, args)
  }
  return args
}

function checkArgs(entries: readonly StoreEntry[], cost: number): string[] {
  const args = new Array<string>(1 + 4 * entries.length)
  args[0] = String(cost)
  for (let i = 0; i < entries.length; i++) {
    const pa = policyArgs(entries[i].policy)
    for (let j = 0; j < 4; j++) args[1 + 4 * i + j] = pa[j]
  }
  return args
}

function parseReply(reply: unknown, pairs: number): StoreReply {
  if (!Array.isArray(reply) || reply.length !== 2 + 5 * pairs) {
    throw new StoreError(`unexpected script reply: ${JSON.stringify(reply)?.slice(0, 200)}`)
  }
  const results: StoreResult[] = new Array(pairs)
  for (let i = 0; i < pairs; i++) {
    const b = 2 + i * 5
    results[i] = {
      allowed: Number(reply[b]) === 1,
      remaining: Number(reply[b + 1]),
      resetMs: Number(reply[b + 2]),
      retryAfterMs: Number(reply[b + 3]),
      tag: Number(reply[b + 4]),
    }
  }
  return { nowUs: Number(reply[0]), results }
}
