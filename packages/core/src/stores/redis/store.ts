/**
 * The store of record: every call is one EVALSHA of a generated script (EVAL only after NOSCRIPT, and
 * nothing else retried, because a failed call may have been applied: guard.ts). Accepts node-redis v6
 * clients and clusters (`createCluster`), ioredis and iovalkey clients and clusters (`Redis.Cluster`,
 * `Cluster`), Valkey GLIDE's `GlideClient` and `GlideClusterClient` (see glide-client.ts),
 * `@upstash/redis` and `@vercel/kv` (Redis over HTTP, see http-client.ts), or anything implementing the
 * {@link ScriptClient} seam (script-client.ts).
 *
 * On a cluster, every script is routed by its first key (the clients follow MOVED and ASK; TRYAGAIN,
 * which the server answers before running anything, is retried here), and
 * NOSCRIPT is recovered on the node that owns the slot. The keys of one identity share a hash tag, so a
 * single-identity call stays one atomic script; a call whose keys live in several slots runs one script
 * per slot and gives back the spends of the others when one refuses (cluster.ts, docs/cluster.md).
 * @module
 */

import { monotonicMs, type Settles, type SettlingStore } from '../../deadlines'
import { brand, ConfigError, isBranded, StoreError } from '../../errors'
import { emit, type TollgateEvent } from '../../events'
import { refundMarkerKey } from '../../keys'
import { check, checkOptions, type OptionCheck } from '../../options'
import { PatternTable, prefixOfKey } from '../../patterns'
import { hasPenalty } from '../../penalty'
import { shareState } from '../../registry'
import {
  BATCH,
  BY_ALGORITHM,
  CONSUME,
  FINGERPRINT,
  PEEK,
  REFUND,
  RESET,
  type Script,
  SECRET,
} from '../../scripts/generated'
import type {
  Controls,
  PairCost,
  ResolvedPolicy,
  SpendOnce,
  Store,
  StoreEntry,
  StoreReply,
  TopSets,
} from '../../types'
import {
  BATCH_CONSUME,
  BATCH_PEEK,
  BATCH_REFUND,
  Batcher,
  type BatchOp,
  type BatchOption,
  batchSize,
} from './batcher'
import { adaptClient, type ClientKind } from './clients'
import { consumeAcross, peekAcross, pick, refundAcross, type SlotCalls, slotGroups } from './cluster'
import { keySlot } from './cluster-slot'
import { CompactLayout, isUnplaced, SECRET_TTL_MS, type SecretCheck, type Storage } from './compact'
import type { BootGate, ClientGuard, ConnectionWatch } from './connection'
import { RedisControls } from './controls'
import { isNoScript, ScriptRunner } from './guard'
import { ServerClock } from './server-clock'
import { RedisTopSets } from './top-sets'
import {
  checkArgs,
  expiredError,
  isExpired,
  isLean,
  isResend,
  isStale,
  keysOf,
  parseReply,
  patternTail,
  penaltyCall,
  refundArgs,
  resetCall,
  STALE_ATTEMPTS,
  sharedAlgorithm,
  staleError,
  withControls,
} from './wire'

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
   * Receives the store's own events (`eviction-policy`, when the server can evict counters;
   * `expired-call`, a consume that reached Redis too late to act).
   * They also go to the `tollgate:<type>` diagnostics channel. Limiters' `onEvent` hooks do not get them.
   */
  onEvent?: (event: TollgateEvent) => void
  /**
   * Where fixed-window and sliding-window counters live. `'keys'`: a key per (policy, identity), 113 to
   * 135 bytes each. `'compact'`: fields of 8,192 hashes per policy, about 25 bytes per identity at
   * 100,000 identities and 15 at a million, exact in the same races (docs/storage.md). Switching starts
   * those counters afresh: each identity may spend its limit once more in the window of the switch.
   * @default 'keys'
   */
  storage?: Storage
  /**
   * With `storage: 'compact'`: the key of the hash that places identities in buckets, so that no client
   * can choose where it lands. Optional: without it, each prefix's secret is generated once and kept in
   * Redis (`<prefix>:{~h:s}`), read at a store's first call for the prefix and every minute after. Give
   * one (at least 16 characters, the same in every process of one Redis) to keep it out of Redis; Redis
   * then holds only its fingerprint. Changing it moves every identity, as switching storage does. A store
   * whose secret differs from the one its prefix's key in Redis records, or that has none where another
   * store's is configured (or the reverse), refuses that prefix's calls (docs/storage.md).
   */
  secret?: string
}

/** `batch` is checked where it is resolved (batcher.ts), `secret` by the compact layout. */
const REDIS_STORE_OPTIONS = {
  batch: check.any,
  onEvent: check.fn,
  storage: check.oneOf(['keys', 'compact']),
  secret: check.any,
} as const satisfies Record<keyof RedisStoreOptions, OptionCheck>

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
  private readonly runner: ScriptRunner
  readonly topSets: TopSets
  readonly controls: Controls
  private readonly redisControls: RedisControls
  /** Each limiter prefix's pattern overrides as this process last read them (patterns.ts). */
  private readonly tables = new Map<string, PatternTable>()
  private readonly tableByPolicy = new WeakMap<ResolvedPolicy, PatternTable>()
  private readonly watch: ConnectionWatch | undefined
  /** Until the client's first connection: where calls wait for it. */
  private readonly gate: BootGate | undefined
  /** The shortest `timeoutMs` of the limiters on this store: how long a call waits for the first connection. */
  private bootWaitMs: number | undefined
  private readonly guard: ClientGuard | undefined
  private readonly nodeOf?: (slot: number) => string | undefined
  private readonly batcher?: Batcher
  private readonly deadline?: (timeoutMs: number) => void
  /** The single-slot calls, for a call whose keys span slots (built once, not per call). */
  private readonly perSlot: SlotCalls
  /** `storage: 'compact'`: where the window counters go. */
  private readonly layout?: CompactLayout
  /** Runs fingerprint.lua (a configured secret) or secret.lua (one kept in Redis) for the layout (built once). */
  private readonly checkSecret: SecretCheck = (key, value) =>
    this.layout!.keptInRedis
      ? this.runner.run(SECRET, [key], [value])
      : this.runner.run(FINGERPRINT, [key], [value, String(SECRET_TTL_MS)])
  /** The act-by time of each spending call (server-clock.ts). */
  private readonly clock = new ServerClock()
  private readonly onEvent?: (event: TollgateEvent) => void
  /** Counts a call that reached Redis after its act-by time: not applied, its caller answered without it. */
  private readonly expired = () => emit(this.onEvent, { type: 'expired-call' })

  constructor(client: unknown, options: RedisStoreOptions = {}) {
    checkOptions(options, REDIS_STORE_OPTIONS)
    if (options.storage !== 'compact' && options.secret !== undefined) {
      throw new ConfigError('secret', "given only with storage: 'compact'", 'a secret')
    }
    // built before the client is adapted, so that a bad secret is the error named first
    let layout = options.storage === 'compact' ? new CompactLayout(options.secret) : undefined
    const adapted = adaptClient(client)
    if (layout !== undefined && adapted.cluster) layout = new CompactLayout(options.secret, true)
    this.layout = layout
    // Every store over this client writes the same keys: a clash between their limiters is refused too.
    shareState(this, client as object)
    this.kind = adapted.kind
    this.cluster = adapted.cluster
    this.watch = adapted.watch
    this.watch?.listen(options.onEvent)
    this.gate = adapted.gate
    this.guard = adapted.guard
    this.guard?.listen(options.onEvent)
    this.onEvent = options.onEvent
    this.nodeOf = adapted.nodeOf
    this.runner = new ScriptRunner(
      adapted.run,
      adapted.cluster,
      adapted.watch,
      adapted.guard,
      adapted.noScript ?? isNoScript,
    )
    this.topSets = new RedisTopSets(this.runner)
    this.controls = this.redisControls = new RedisControls(
      this.runner,
      this.cluster,
      (prefix) => this.tableOf(prefix),
      this.cluster && layout !== undefined ? (key) => layout.controlCopy(key, this.checkSecret) : undefined,
    )
    this.perSlot = {
      consume: (entries, cost, timeoutMs) => this.consumeIn(entries, cost, this.clock.actBy(timeoutMs)),
      peek: (entries, cost) => this.peekIn(entries, cost),
      refund: (entries, tags, cost, once) => this.refundIn(entries, tags, cost, once),
    }
    const size = batchSize(options?.batch)
    // Over HTTP the client's own /pipeline already sends a turn's calls as one request (and edge runtimes
    // lack setImmediate): batching is for the TCP clients.
    if (size > 1 && this.kind !== 'upstash' && typeof setImmediate === 'function') {
      this.batcher = new Batcher(size, {
        cluster: this.cluster,
        run: (script, keys, args) => this.runner.run(script, keys, args),
        single: (op, entries, cost, tags, once, actBy) => this.single(op, entries, cost, tags, once, actBy),
        clock: this.clock,
        expired: this.expired,
        patterns: (entries) => this.patternsOf(entries),
        versionKey: (table, entries) => this.versionKey(table, entries),
        reload: (tables) => Promise.all(tables.map((t) => this.redisControls.load(t))),
      })
    }
    this.deadline = adapted.useDeadline
  }

  /**
   * Told each limiter's `timeoutMs` at construction. Over HTTP, a request still unanswered when the
   * longest of them has passed is aborted (the limiter has answered its caller by then).
   */
  useDeadline(timeoutMs: number): void {
    this.deadline?.(timeoutMs)
    if (this.bootWaitMs === undefined || timeoutMs < this.bootWaitMs) this.bootWaitMs = timeoutMs
  }

  /**
   * Before the client's first connection: the call once it is ready, or a StoreError at the shortest
   * deadline (never later than its caller's, whose deadline starts after this). Undefined once the client
   * is ready, or with no limiter's deadline to wait within.
   */
  private afterBoot<T>(call: () => Promise<T>): Promise<T> | undefined {
    if (this.bootWaitMs === undefined) return undefined
    // A tenth short of the deadline, so the gate's StoreError, not the deadline, answers the caller
    return this.gate!.wait(this.bootWaitMs * 0.9)?.then(call)
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
      const first = (this.layout?.map(entries) ?? entries)[0]!
      // not placed before its prefix's kept secret is read: its node is not known yet
      return isUnplaced(first) ? undefined : this.nodeOf(keySlot(first.key))
    } catch {
      return undefined
    }
  }

  // consume and peek are not `async`: they hand back the batcher's or the script's own promise, which
  // saves a wrapping promise and its microtask turns per call (nothing on their path throws).
  consume(entries: readonly StoreEntry[], cost: PairCost, timeoutMs?: number): Promise<StoreReply> {
    if (this.gate?.booting) {
      const later = this.consumeAfterBoot(entries, cost, timeoutMs)
      if (later) return later
    }
    if (this.layout) return this.consumeCompact(entries, cost, timeoutMs)
    return this.consumeMapped(entries, cost, timeoutMs)
  }

  // The closures of the two paths below live in their own functions: in `consume` they would make every
  // call allocate the context they capture.
  private consumeAfterBoot(
    entries: readonly StoreEntry[],
    cost: PairCost,
    timeoutMs: number | undefined,
  ): Promise<StoreReply> | undefined {
    // the call's act-by counts from now, not from the end of its wait
    const at = monotonicMs()
    return this.afterBoot(() =>
      this.consume(entries, cost, timeoutMs === undefined ? undefined : timeoutMs - (monotonicMs() - at)),
    )
  }

  private consumeCompact(
    entries: readonly StoreEntry[],
    cost: PairCost,
    timeoutMs: number | undefined,
  ): Promise<StoreReply> {
    const mapped = this.layout!.map(entries)
    const held = this.layout!.verify(entries, mapped, this.checkSecret)
    if (held !== undefined) return held.then((placed) => this.consumeMapped(placed, cost, timeoutMs))
    return this.consumeMapped(mapped, cost, timeoutMs)
  }

  /**
   * `consume`, its outcome handed to `to` rather than to a promise of its own: for the limiter, whose
   * call settles its caller's promise itself. A queued call costs no promise, closure or microtask turn.
   * `startedMs`: the caller's monotonic reading just before, from which the act-by counts.
   */
  readonly consumeTo: SettlingStore['consumeTo'] = (entries, cost, timeoutMs, to, startedMs) => {
    if (this.gate?.booting || this.layout || this.cluster || !this.batcher) {
      settleFrom(this.consume(entries, cost, timeoutMs), to)
      return
    }
    const actBy = this.clock.actBy(timeoutMs, startedMs)
    if (this.batcher.busy())
      this.batcher.enqueue(BATCH_CONSUME, entries, cost, undefined, undefined, actBy, to)
    else settleFrom(this.consumeIn(entries, cost, actBy), to)
  }

  private consumeMapped(
    entries: readonly StoreEntry[],
    cost: PairCost,
    timeoutMs?: number,
  ): Promise<StoreReply> {
    const groups = this.cluster ? slotGroups(entries) : undefined
    if (groups) return consumeAcross(this.perSlot, entries, groups, cost, timeoutMs)
    const actBy = this.clock.actBy(timeoutMs)
    if (this.batcher?.busy())
      return this.batcher.add(BATCH_CONSUME, entries, cost, undefined, undefined, actBy)
    return this.consumeIn(entries, cost, actBy)
  }

  peek(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    if (this.gate?.booting) {
      const later = this.afterBoot(() => this.peek(entries, cost))
      if (later) return later
    }
    if (this.layout) {
      const mapped = this.layout.map(entries)
      const held = this.layout.verify(entries, mapped, this.checkSecret)
      if (held !== undefined) return held.then((placed) => this.peekMapped(placed, cost))
      entries = mapped
    }
    return this.peekMapped(entries, cost)
  }

  private peekMapped(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    const groups = this.cluster ? slotGroups(entries) : undefined
    if (!groups && this.batcher?.busy()) return this.batcher.add(BATCH_PEEK, entries, cost)
    if (!groups) return this.peekIn(entries, cost)
    return peekAcross(this.perSlot, entries, groups, cost)
  }

  async refund(
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: PairCost,
    once?: SpendOnce,
  ): Promise<number> {
    if (this.gate?.booting) {
      const later = this.afterBoot(() => this.refund(entries, tags, cost, once))
      if (later) return later
    }
    if (this.layout) {
      const mapped = this.layout.map(entries)
      entries = (await this.layout.verify(entries, mapped, this.checkSecret)) ?? mapped
    }
    const groups = this.cluster ? slotGroups(entries) : undefined
    // A refund that carries a spend id is batched with its refund-once marker (op 'R' of batch.lua)
    if (!groups && this.batcher?.busy()) return this.batcher.add(BATCH_REFUND, entries, cost, tags, once)
    if (!groups) return this.refundIn(entries, tags, cost, once)
    return refundAcross(this.perSlot, entries, groups, tags, cost, once)
  }

  async reset(entries: readonly StoreEntry[]): Promise<void> {
    if (this.gate?.booting) {
      const later = this.afterBoot(() => this.reset(entries))
      if (later) return later
    }
    if (this.layout) {
      const mapped = this.layout.map(entries)
      entries = (await this.layout.verify(entries, mapped, this.checkSecret)) ?? mapped
    }
    const groups = this.cluster ? slotGroups(entries) : undefined
    const reset = (group: readonly StoreEntry[]) => {
      const { keys, args } = resetCall(group)
      return this.runner.run(RESET, keys, args)
    }
    await (groups ? Promise.all(groups.map((g) => reset(pick(entries, g)))) : reset(entries))
  }

  /** A batch of one: the call's own script. */
  private single(
    op: BatchOp,
    entries: readonly StoreEntry[],
    cost: PairCost,
    tags?: readonly number[],
    once?: SpendOnce,
    actBy?: number,
  ): Promise<unknown> {
    if (op === BATCH_CONSUME) return this.consumeIn(entries, cost, actBy)
    if (op === BATCH_PEEK) return this.peekIn(entries, cost)
    return this.refundIn(entries, tags ?? [], cost, once)
  }

  /** A limiter prefix's pattern table (one per prefix and store). */
  private tableOf(prefix: string): PatternTable {
    let table = this.tables.get(prefix)
    if (table === undefined) {
      table = new PatternTable(prefix)
      this.tables.set(prefix, table)
    }
    return table
  }

  /** The pattern table of a call's limiter. */
  private patternsOf(entries: readonly StoreEntry[]): PatternTable {
    const first = entries[0]!
    let table = this.tableByPolicy.get(first.policy)
    if (table === undefined) {
      table = this.tableOf(prefixOfKey(first.key))
      this.tableByPolicy.set(first.policy, table)
    }
    return table
  }

  /** The version key of a call's slot (patterns.ts). */
  private versionKey(table: PatternTable, entries: readonly StoreEntry[]): string {
    return table.versionKey(this.cluster ? keySlot(entries[0]!.key) : undefined)
  }

  /**
   * One consume or peek script's KEYS and ARGV, its pattern tail and version key last (pattern.lua).
   * A call answered stale reloads the table and goes again, a few times at most.
   */
  private checked(
    script: Script,
    entries: readonly StoreEntry[],
    cost: PairCost,
    actBy: number | undefined,
    attempt = 0,
    spend = false,
  ): Promise<unknown> {
    const table = this.patternsOf(entries)
    // a consume of one compact pair goes lean (its first level, not its three, and its control key
    // once, as the call's) until it needs the rest
    const first = entries[0]!
    const lean = spend && entries.length === 1 && isLean(first)
    const keys = lean ? [first.levels[0], first.control] : withControls(entries)
    const args = checkArgs(entries, cost, actBy)
    keys.push(this.versionKey(table, entries))
    args.push(patternTail(table, entries))
    return this.runner.run(script, keys, args).then((reply) => {
      if (lean && isResend(reply)) {
        first.whole = true
        return this.checked(script, entries, cost, actBy, attempt, spend)
      }
      if (!isStale(reply)) return reply
      if (attempt === STALE_ATTEMPTS) throw staleError()
      return this.redisControls
        .load(table)
        .then(() => this.checked(script, entries, cost, actBy, attempt + 1, spend))
    })
  }

  /** One atomic consume script: every entry's key is in one slot (or the server is not a cluster). */
  private async consumeIn(entries: readonly StoreEntry[], cost: PairCost, actBy = 0): Promise<StoreReply> {
    if (hasPenalty(entries)) return this.withPenalties('C', entries, cost, actBy)
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.consume ?? CONSUME
    return this.read(await this.checked(script, entries, cost, actBy, 0, true), entries.length)
  }

  /** A consume or peek reply: the server's time learnt, an expired call counted and refused. */
  private read(reply: unknown, pairs: number): StoreReply {
    this.clock.learn(reply)
    if (isExpired(reply)) {
      this.expired()
      throw expiredError()
    }
    return parseReply(reply, pairs)
  }

  private async peekIn(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply> {
    if (hasPenalty(entries)) return this.withPenalties('P', entries, cost)
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.peek ?? PEEK
    return this.read(await this.checked(script, entries, cost, undefined), entries.length)
  }

  /**
   * A call with penalties: one batch script holding this call alone (ops 'C' / 'P' of lua/batch.lua,
   * whose reply for one call is consume.lua's), so the block and the refusal are decided together.
   */
  private async withPenalties(
    op: 'C' | 'P',
    entries: readonly StoreEntry[],
    cost: PairCost,
    actBy?: number,
  ): Promise<StoreReply> {
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.batch ?? BATCH
    let reply: unknown
    for (let attempt = 0; ; attempt++) {
      const table = this.patternsOf(entries)
      const patterns = { table, versionKey: this.versionKey(table, entries) }
      const { keys, args } = penaltyCall(op, entries, cost, actBy, patterns)
      reply = await this.runner.run(script, keys, args)
      if (!isStale(reply)) break
      if (attempt === STALE_ATTEMPTS) throw staleError()
      await this.redisControls.load(table)
    }
    if (Array.isArray(reply) && Number(reply[1]) === -1) {
      throw new StoreError(`${script.name} script failed: ${String(reply[2])}`)
    }
    return this.read(reply, entries.length)
  }

  private async refundIn(
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: PairCost,
    once?: SpendOnce,
  ): Promise<number> {
    const keys = keysOf(entries)
    const args = refundArgs(entries, tags, cost, once)
    if (once) keys.push(refundMarkerKey(entries[0]!.key, once.id))
    const script = BY_ALGORITHM[sharedAlgorithm(entries)]?.refund ?? REFUND
    return Number(await this.runner.run(script, keys, args))
  }
}

/** Hands a promise's outcome to `to`. */
function settleFrom<T>(promise: Promise<T>, to: Settles<T>): void {
  promise.then(
    (value) => to.reply(value),
    (error) => to.reject(error),
  )
}
