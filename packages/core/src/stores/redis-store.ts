/**
 * The store of record: every call is one EVALSHA of a generated script (EVAL only after NOSCRIPT, and
 * nothing else retried, because a failed call may have been applied). Accepts node-redis v6 clients and
 * clusters (`createCluster`), ioredis and iovalkey clients and clusters (`Redis.Cluster`, `Cluster`), Valkey
 * GLIDE's `GlideClient` and `GlideClusterClient` (see glide-client.ts), `@upstash/redis` and `@vercel/kv`
 * (Redis over HTTP, see http-client.ts), or anything implementing the {@link ScriptClient} seam.
 *
 * On a cluster, every script is routed by its first key (the clients follow MOVED and ASK; TRYAGAIN,
 * which the server answers before running anything, is retried here), and
 * NOSCRIPT is recovered on the node that owns the slot. The keys of one identity share a hash tag, so a
 * single-identity call stays one atomic script; a call whose keys live in several slots runs one script
 * per slot and gives back the spends of the others when one refuses (see docs/cluster.md).
 * @module
 */

import { ALGORITHM_CODES } from '../algorithms'
import { costAt, isFree, pickCost } from '../cost'
import { brand, ConfigError, isBranded, StoreError } from '../errors'
import type { TollgateEvent } from '../events'
import { penaltyKey, refundMarkerKey } from '../keys'
import { check, checkOptions, type OptionCheck } from '../options'
import { hasPenalty, penaltyArgs } from '../penalty'
import { BATCH, BY_ALGORITHM, CONSUME, PEEK, REFUND, RESET, type Script } from '../scripts/generated'
import type { PairCost, SpendOnce, Store, StoreEntry, StoreReply, StoreResult } from '../types'
import {
  BATCH_CONSUME,
  BATCH_PEEK,
  BATCH_REFUND,
  Batcher,
  type BatchOp,
  type BatchOption,
  batchSize,
  policyArgs,
} from './batcher'
import { keySlot, sameHashTag } from './cluster-slot'
import {
  type ClientGuard,
  type ConnectionWatch,
  dropResendsOnClose,
  guardClient,
  ioredisHooks,
  nodeRedisHooks,
  watchOf,
} from './connection'
import { GlideScriptClient, isGlideClient, isGlideNoScript } from './glide-client'
import { isUpstashClient, RestScriptClient } from './http-client'
import { ioredisClusterRouter } from './ioredis-cluster'

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
  /**
   * `true` when the client talks to a Redis Cluster and routes each script by its first key: calls whose
   * keys live in different hash slots are then split into one script per slot.
   * @default false
   */
  readonly cluster?: boolean
}

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /**
   * Batched decisions: the calls made in one turn of the event loop go to Redis as one script (per
   * cluster slot), evaluated in order, each exactly as if alone. The first call of a turn is sent at once
   * (no timer, no added latency). `false` sends every call as its own script. Not applied to
   * `@upstash/redis`, whose REST client sends the calls of one turn as one `/pipeline` request itself.
   * @default { maxSize: 64 }
   */
  batch?: BatchOption
  /**
   * Receives the store's own events (today: `eviction-policy`, when the server can evict counters).
   * They also go to the `tollgate:<type>` diagnostics channel. Limiters' `onEvent` hooks do not get them.
   */
  onEvent?: (event: TollgateEvent) => void
}

/** `batch` is checked where it is resolved (batcher.ts). */
const REDIS_STORE_OPTIONS = { batch: check.any, onEvent: check.fn } as const satisfies Record<
  keyof RedisStoreOptions,
  OptionCheck
>

/**
 * Which client family a store was given (for diagnostics). `'ioredis'` is also iovalkey, Valkey's fork of
 * ioredis, which Tollgate drives exactly the same way.
 */
export type ClientKind = 'node-redis' | 'ioredis' | 'valkey-glide' | 'upstash' | 'custom'

// TRYAGAIN (a multi-key call on a slot being migrated, its keys split between the two nodes) is refused
// before the script runs, so resending cannot double-spend. Retried here for both cluster clients (the
// ioredis Cluster's own retries are not used, see ioredis-cluster.ts). 16 x 25 ms stays inside the default deadline.
const TRY_AGAIN_ATTEMPTS = 16
const TRY_AGAIN_DELAY_MS = 25

const ALG_CODE = ALGORITHM_CODES

interface Adapted {
  kind: ClientKind
  cluster: boolean
  run: ScriptClient
  /**
   * The connection watch of a standalone node-redis or ioredis client (undefined for clusters, where
   * per-node breakers and the deadline decide, and for custom clients).
   */
  watch?: ConnectionWatch
  /** node-redis and ioredis: Tollgate's own 'error' listener, and node-redis' write fence. */
  guard?: ClientGuard
  /** On a cluster: the address of the primary that owns a slot, as the client currently sees it. */
  nodeOf?: (slot: number) => string | undefined
  /**
   * Clients that can abort a request (Redis over HTTP) are told each limiter's deadline, and Valkey GLIDE,
   * whose own request timeout must not outlast it.
   */
  useDeadline?: (timeoutMs: number) => void
  /** How this client reports NOSCRIPT, when not by the reply's own error code ({@link isNoScript}). */
  noScript?: (error: unknown) => boolean
}

function adapt(input: any): Adapted {
  const client = input
  if (client && typeof client.defineCommand === 'function' && typeof client.evalsha === 'function') {
    // ioredis, and iovalkey (its fork: the same status, queues, 'close' order and resend behaviour the
    // hooks rely on). Redis.Cluster routes EVALSHA/EVAL by their first key (numkeys-aware key extraction).
    const cluster = client.isCluster === true
    let watch: ConnectionWatch | undefined
    if (!cluster) {
      watch = watchOf(client, () => {
        dropResendsOnClose(client)
        return ioredisHooks(client)
      })
    }
    const guard = guardClient(client, undefined)
    return {
      kind: 'ioredis',
      cluster,
      watch,
      guard,
      nodeOf: (slot) => client.slots?.[slot]?.[0],
      // A cluster's own routing would hold our calls in its queues (see ioredis-cluster.ts).
      run: cluster
        ? ioredisClusterRouter(client, guard)
        : {
            evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
            eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
          },
    }
  }
  if (client && typeof client.evalSha === 'function' && typeof client.eval === 'function') {
    // node-redis v6: client, cluster (routed by the first key) and pool all share this API. Its default
    // 5 s per-command timeout arms an AbortSignal per command; Tollgate's own deadline covers our calls.
    // Each command carries a fence generation's abortSignal instead (see WriteFence).
    const cluster = typeof client.getSlotMaster === 'function' && typeof client.nodeClient === 'function'
    const raw = input
    const watch =
      !cluster && typeof raw.isReady === 'boolean' && typeof raw.destroy === 'function'
        ? watchOf(raw, () => nodeRedisHooks(raw))
        : undefined
    const guard = guardClient(
      raw,
      typeof raw.withCommandOptions === 'function'
        ? (abortSignal) => raw.withCommandOptions({ timeout: 0, abortSignal })
        : undefined,
    )
    const fence = guard.fence
    if (!fence) {
      return {
        kind: 'node-redis',
        cluster,
        watch,
        guard,
        nodeOf: (slot) => raw.slots?.[slot]?.master?.address,
        run: {
          evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
          eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
        },
      }
    }
    return {
      kind: 'node-redis',
      cluster,
      watch,
      guard,
      nodeOf: (slot) => raw.slots?.[slot]?.master?.address,
      run: {
        evalsha: async (sha, keys, args) => {
          const g = fence.take()
          try {
            return await g.client.evalSha(sha, { keys, arguments: args })
          } finally {
            fence.done(g)
          }
        },
        eval: async (source, keys, args) => {
          const g = fence.take()
          try {
            return await g.client.eval(source, { keys, arguments: args })
          } finally {
            fence.done(g)
          }
        },
      },
    }
  }
  if (isGlideClient(client)) {
    // Valkey GLIDE: no events and no readiness to watch; its requestTimeout withdraws what it has not
    // written (see glide-client.ts).
    const glide = new GlideScriptClient(client)
    return {
      kind: 'valkey-glide',
      cluster: glide.cluster,
      run: glide,
      nodeOf: glide.cluster ? (slot) => glide.nodeOf(slot) : undefined,
      useDeadline: (ms) => glide.useDeadline(ms),
      noScript: isGlideNoScript,
    }
  }
  if (isUpstashClient(client)) {
    // @upstash/redis or @vercel/kv: connectionless, so never "reconnecting" (see http-client.ts).
    const rest = new RestScriptClient(client)
    return {
      kind: 'upstash',
      cluster: false,
      run: rest,
      useDeadline: (ms) => rest.useDeadline(ms),
    }
  }
  if (client && typeof client.evalsha === 'function' && typeof client.eval === 'function') {
    return {
      kind: 'custom',
      cluster: client.cluster === true,
      run: client as ScriptClient,
    }
  }
  throw new ConfigError(
    'store client',
    'a node-redis v6 client or cluster, an ioredis or iovalkey client or cluster, a Valkey GLIDE client or cluster client, an @upstash/redis (or @vercel/kv) client, or an object with evalsha(sha, keys, args) and eval(source, keys, args)',
    client,
    'type',
  )
}

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

/**
 * @example
 * const redis = await createClient({ url: process.env.REDIS_URL }).on('error', console.error).connect()
 * const store = new RedisStore(redis)
 *
 * @example
 * // A cluster: nothing else changes (connect() fails once with every node down: retry it).
 * const cluster = createCluster({ rootNodes: [{ url: 'redis://10.0.0.1:6379' }] }).on('error', console.warn)
 * const connect = () => cluster.connect().catch(() => setTimeout(connect, 1000))
 * connect()
 * const store = new RedisStore(cluster)
 */
export class RedisStore implements Store {
  static {
    brand(RedisStore, 'RedisStore')
  }
  /** Recognises a store of either build (ESM, CommonJS) or copy of the package. */
  static [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass instanceof asks about
    return isBranded(this, value)
  }
  readonly kind: ClientKind
  /** Whether the client is a cluster client (calls whose keys span hash slots are split per slot). */
  readonly cluster: boolean
  private readonly client: ScriptClient
  private readonly watch: ConnectionWatch | undefined
  private readonly guard: ClientGuard | undefined
  private readonly nodeOf?: (slot: number) => string | undefined
  private readonly batcher?: Batcher
  private readonly deadline?: (timeoutMs: number) => void
  private readonly noScript: (error: unknown) => boolean

  constructor(client: unknown, options: RedisStoreOptions = {}) {
    checkOptions(options, REDIS_STORE_OPTIONS)
    const adapted = adapt(client)
    this.kind = adapted.kind
    this.cluster = adapted.cluster
    this.client = adapted.run
    this.watch = adapted.watch
    this.watch?.listen(options.onEvent)
    this.guard = adapted.guard
    this.guard?.listen(options.onEvent)
    this.nodeOf = adapted.nodeOf
    const size = batchSize(options?.batch)
    // Over HTTP the client's own /pipeline already sends a turn's calls as one request (and edge runtimes
    // lack setImmediate): batching is for the TCP clients.
    if (size > 1 && this.kind !== 'upstash' && typeof setImmediate === 'function') {
      this.batcher = new Batcher(size, {
        cluster: this.cluster,
        run: (script, keys, args) => this.run(script, keys, args),
        single: (op, entries, cost, tags, once) => this.single(op, entries, cost, tags, once),
      })
    }
    this.deadline = adapted.useDeadline
    this.noScript = adapted.noScript ?? isNoScript
  }

  /**
   * Told each limiter's `timeoutMs` at construction. Over HTTP, a request still unanswered when the
   * longest of them has passed is aborted (the limiter has answered its caller by then).
   */
  useDeadline(timeoutMs: number): void {
    this.deadline?.(timeoutMs)
  }

  /**
   * When the client last became ready (monotonic ms), -1 while it is not; undefined for clusters and
   * custom clients. Read by an open circuit breaker only.
   */
  readySince(): number | undefined {
    return this.watch?.readySince()
  }

  /** A call passed the limiter's deadline: counted towards dropping a connection that went silent. */
  onTimeout(): void {
    // Its caller is being answered by the failure policy: a command of ours the client has not written
    // yet (offline queue, backpressure) must never be written now.
    this.guard?.abort()
    this.watch?.timedOut()
  }

  /**
   * On a cluster, the primary owning the call's first key: a limiter keeps one circuit breaker per
   * primary, so one dead primary does not send calls for the healthy ones to the failure policy.
   */
  scopeOf(entries: readonly StoreEntry[]): string | undefined {
    if (!this.cluster || !this.nodeOf) return undefined
    try {
      return this.nodeOf(keySlot(entries[0].key))
    } catch {
      return undefined
    }
  }

  // consume and peek are not `async`: they hand back the batcher's or the script's own promise, which
  // saves a wrapping promise and its microtask turns per call (nothing on their path throws).
  consume(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    const groups = this.cluster ? slotGroups(entries) : undefined
    if (groups) return this.consumeAcross(entries, groups, cost)
    if (this.batcher?.busy()) return this.batcher.add(BATCH_CONSUME, entries, cost)
    return this.consumeIn(entries, cost)
  }

  peek(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    const groups = this.cluster ? slotGroups(entries) : undefined
    if (!groups && this.batcher?.busy()) return this.batcher.add(BATCH_PEEK, entries, cost)
    if (!groups) return this.peekIn(entries, cost)
    return this.peekAcross(entries, groups, cost)
  }

  private async peekAcross(
    entries: readonly StoreEntry[],
    groups: number[][],
    cost: PairCost,
  ): Promise<StoreReply> {
    const replies = await Promise.all(groups.map((g) => this.peekIn(pick(entries, g), pickCost(cost, g))))
    return merge(entries.length, groups, replies)
  }

  async refund(
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: PairCost,
    once?: SpendOnce,
  ): Promise<number> {
    const groups = this.cluster ? slotGroups(entries) : undefined
    // A refund that carries a spend id is batched with its refund-once marker (op 'R' of batch.lua)
    if (!groups && this.batcher?.busy()) return this.batcher.add(BATCH_REFUND, entries, cost, tags, once)
    if (!groups) return this.refundIn(entries, tags, cost, once)
    // One marker per slot group, in that group's slot: each group's script is idempotent on its own.
    const times = await Promise.all(
      groups.map((g) =>
        this.refundIn(
          pick(entries, g),
          pick(tags, g),
          pickCost(cost, g),
          once && { ...once, spent: pickCost(once.spent, g) },
        ),
      ),
    )
    return Math.max(...times)
  }

  async reset(entries: readonly StoreEntry[]): Promise<void> {
    const groups = this.cluster ? slotGroups(entries) : undefined
    if (!groups) {
      await this.run(RESET, resetKeys(entries), [])
      return
    }
    await Promise.all(groups.map((g) => this.run(RESET, resetKeys(pick(entries, g)), [])))
  }

  /** A batch of one: the call's own script. */
  private single(
    op: BatchOp,
    entries: readonly StoreEntry[],
    cost: PairCost,
    tags?: readonly number[],
    once?: SpendOnce,
  ): Promise<unknown> {
    if (op === BATCH_CONSUME) return this.consumeIn(entries, cost)
    if (op === BATCH_PEEK) return this.peekIn(entries, cost)
    return this.refundIn(entries, tags ?? [], cost, once)
  }

  /** One atomic consume script: every entry's key is in one slot (or the server is not a cluster). */
  private async consumeIn(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    if (hasPenalty(entries)) return this.withPenalties('C', entries, cost)
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.consume ?? CONSUME
    return parseReply(await this.run(script, keysOf(entries), checkArgs(entries, cost)), entries.length)
  }

  private async peekIn(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    if (hasPenalty(entries)) return this.withPenalties('P', entries, cost)
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.peek ?? PEEK
    return parseReply(await this.run(script, keysOf(entries), checkArgs(entries, cost)), entries.length)
  }

  /**
   * A call with penalties: one batch script holding this call alone (ops 'C' / 'P' of lua/batch.lua,
   * whose reply for one call is consume.lua's), so the block and the refusal are decided together.
   */
  private async withPenalties(
    op: 'C' | 'P',
    entries: readonly StoreEntry[],
    cost: PairCost,
  ): Promise<StoreReply> {
    const { keys, args } = penaltyCall(op, entries, cost)
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.batch ?? BATCH
    const reply = await this.run(script, keys, args)
    if (Array.isArray(reply) && Number(reply[1]) === -1) {
      throw new StoreError(`${script.name} script failed: ${String(reply[2])}`)
    }
    return parseReply(reply, entries.length)
  }

  private async refundIn(
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: PairCost,
    once?: SpendOnce,
  ): Promise<number> {
    const keys = keysOf(entries)
    let args: string[]
    if (typeof cost === 'number' && (once === undefined || typeof once.spent === 'number')) {
      args = [String(cost)]
      entries.forEach((e, i) => {
        args.push(...policyArgs(e.policy), String(tags[i]))
      })
      if (once) args.push(String(once.spent))
    } else {
      // a cost per pair: 7 per pair, each with its cost and whole spend (refund.lua)
      args = ['*']
      entries.forEach((e, i) => {
        const spent = once ? costAt(once.spent, i) : 0
        args.push(...policyArgs(e.policy), String(tags[i]), String(costAt(cost, i)), String(spent))
      })
    }
    if (once) {
      keys.push(refundMarkerKey(keys[0], once.id))
      if (once.settle) args.push('1')
    }
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.refund ?? REFUND
    return Number(await this.run(script, keys, args))
  }

  /**
   * A call whose keys live in several slots: one atomic consume per slot, in parallel. Each script admits
   * only what its own keys allow, so the call never over-admits. When any slot refuses (or fails), the
   * spends that stood on the other slots are refunded with their tags before answering: a refused call
   * holds another key's quota only until that refund lands. A refund that fails leaves the spend to expire
   * with its window, which can only refuse more, never admit more.
   */
  private async consumeAcross(
    entries: readonly StoreEntry[],
    groups: number[][],
    cost: PairCost,
  ): Promise<StoreReply> {
    const settled = await Promise.allSettled(
      groups.map((g) => this.consumeIn(pick(entries, g), pickCost(cost, g))),
    )
    let refused = false
    let failure: unknown
    for (const s of settled) {
      if (s.status === 'rejected') failure ??= s.reason
      else if (!allAllowed(s.value)) refused = true
    }
    const replies = settled.map((s) => (s.status === 'fulfilled' ? s.value : undefined))
    if (!refused && failure === undefined) return merge(entries.length, groups, replies as StoreReply[])
    const refunds: Promise<void>[] = []
    for (let g = 0; g < groups.length; g++) {
      const reply = replies[g]
      const partCost = pickCost(cost, groups[g])
      if (!reply || !allAllowed(reply) || isFree(partCost)) continue
      const part = pick(entries, groups[g])
      const tags = reply.results.map((r) => r.tag)
      refunds.push(
        this.refundIn(part, tags, partCost).then(
          () => {
            // Given back: the refused call reports these pairs as they were before its spend.
            replies[g] = {
              nowUs: reply.nowUs,
              results: reply.results.map((r, i) => beforeSpend(r, part[i].policy.burst, costAt(partCost, i))),
            }
          },
          () => {}, // not given back: the numbers after the spend stay true
        ),
      )
    }
    await Promise.all(refunds)
    // A slot that failed leaves the call undecided: the failure policy decides, as for one node.
    if (failure !== undefined) throw failure
    return merge(entries.length, groups, replies as StoreReply[])
  }

  /**
   * EVALSHA; on NOSCRIPT (restart, failover, SCRIPT FLUSH, a new node) one EVAL, which caches it again.
   * Both are routed by the first key, so on a cluster the EVAL reaches the node that said NOSCRIPT (or,
   * if the slot moved meanwhile, its new owner, which needs the EVAL just as much).
   */
  private async run(script: Script, keys: string[], args: string[]): Promise<unknown> {
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

/**
 * The entries' indexes grouped by hash slot, or `undefined` when one script can take them all (every key
 * shares one hash tag, the common case, decided without hashing; or all land in one slot anyway).
 */
function slotGroups(entries: readonly StoreEntry[]): number[][] | undefined {
  if (entries.length < 2) return undefined
  const first = entries[0].key
  let i = 1
  while (i < entries.length && sameHashTag(first, entries[i].key)) i++
  if (i === entries.length) return undefined
  const bySlot = new Map<number, number[]>()
  for (let j = 0; j < entries.length; j++) {
    const slot = keySlot(entries[j].key)
    const group = bySlot.get(slot)
    if (group) group.push(j)
    else bySlot.set(slot, [j])
  }
  return bySlot.size > 1 ? [...bySlot.values()] : undefined
}

function pick<T>(items: readonly T[], indexes: readonly number[]): T[] {
  const out = new Array<T>(indexes.length)
  for (let i = 0; i < indexes.length; i++) out[i] = items[indexes[i]]
  return out
}

/** Reassembles per-slot replies in the call's entry order. */
function merge(pairs: number, groups: readonly number[][], replies: readonly StoreReply[]): StoreReply {
  const results = new Array<StoreResult>(pairs)
  let nowUs = 0
  for (let g = 0; g < groups.length; g++) {
    const reply = replies[g]
    nowUs = Math.max(nowUs, reply.nowUs)
    for (let i = 0; i < groups[g].length; i++) results[groups[g][i]] = reply.results[i]
  }
  return { nowUs, results }
}

function allAllowed(reply: StoreReply): boolean {
  for (const r of reply.results) if (!r.allowed) return false
  return true
}

/**
 * An admitted pair's numbers as they were before a spend of `cost` that is being given back: `remaining`
 * exactly; `resetMs` is 0 when that leaves the pair at full capacity, else the post-spend value, an upper
 * bound (the pre-spend reset is not in the reply).
 */
function beforeSpend(r: StoreResult, capacity: number, cost: number): StoreResult {
  const remaining = Math.min(capacity, r.remaining + cost)
  return {
    allowed: true,
    remaining,
    resetMs: remaining >= capacity ? 0 : r.resetMs,
    retryAfterMs: 0,
    tag: r.tag,
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

/** KEYS and ARGV of one call with penalties, as lua/batch.lua takes it ('C' consume, 'P' peek). */
export function penaltyCall(
  op: 'C' | 'P',
  entries: readonly StoreEntry[],
  cost: PairCost,
): { keys: string[]; args: string[] } {
  const keys = keysOf(entries)
  const args: string[] = []
  // a cost per pair goes first, as batch.lua's '$' for the call that follows
  if (typeof cost !== 'number') args.push('$', String(cost.length), ...cost.map(String))
  args.push(op, typeof cost === 'number' ? String(cost) : '0', String(entries.length))
  for (const e of entries) args.push(...policyArgs(e.policy))
  for (const e of entries) if (e.policy.penalty) keys.push(penaltyKey(e.key))
  args.push(...penaltyArgs(entries)!)
  return { keys, args }
}

/** The keys a reset deletes: every pair's, and the penalty state of the pairs that have one. */
function resetKeys(entries: readonly StoreEntry[]): string[] {
  const keys = keysOf(entries)
  for (const e of entries) if (e.policy.penalty) keys.push(penaltyKey(e.key))
  return keys
}

function keysOf(entries: readonly StoreEntry[]): string[] {
  const keys = new Array<string>(entries.length)
  for (let i = 0; i < entries.length; i++) keys[i] = entries[i].key
  return keys
}

function checkArgs(entries: readonly StoreEntry[], cost: PairCost): string[] {
  const n = entries.length
  const per = typeof cost !== 'number'
  const args = new Array<string>(1 + (per ? 5 : 4) * n)
  args[0] = per ? '-1' : String(cost)
  for (let i = 0; i < n; i++) {
    const pa = policyArgs(entries[i].policy)
    for (let j = 0; j < 4; j++) args[1 + 4 * i + j] = pa[j]
    // a cost per pair: after the pairs (consume.lua)
    if (per) args[1 + 4 * n + i] = String(cost[i])
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
