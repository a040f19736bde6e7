/**
 * Batched decisions for {@link RedisStore}: the calls a store receives in one turn of the event loop go
 * to Redis as one script (per cluster slot), evaluated in order, so each caller gets exactly the decision
 * it would have got from its own script, one after another.
 *
 * No timer and no added latency: the first call of a turn is sent at once (by the store, as a single
 * call); the calls that follow it in the same turn queue, and the queue is flushed in `setImmediate`,
 * the check phase that follows the poll phase in which the I/O callbacks (requests on other sockets,
 * replies from Redis) ran. A queue that reaches `maxSize` is flushed at once, so no script holds Redis
 * for longer than `maxSize` calls take (see docs/benchmarks.md for the measured bound).
 *
 * Every caller keeps its own promise: the limiter's deadline, breaker and failure policy apply per call.
 * A batch that fails as a whole (connection lost, NOSCRIPT twice, script timeout) rejects every member
 * with the same error; a call that raises inside the script rejects alone.
 * @module
 */

import { controlKeys } from '../../controls'
import { costAt } from '../../cost'
import { holdReply, type Settles } from '../../deadlines'
import { ConfigError, StoreError } from '../../errors'
import { penaltyKey, refundMarkerKey } from '../../keys'
import type { PatternTable } from '../../patterns'
import { penaltyArgs } from '../../penalty'
import { BATCH, BY_ALGORITHM, type Script } from '../../scripts/generated'
import type { PairCost, ResolvedPolicy, SpendOnce, StoreEntry, StoreReply } from '../../types'
import { keySlot } from './cluster-slot'
import type { ServerClock } from './server-clock'
import {
  type CompactEntry,
  controlOf,
  decodePairs,
  EXPIRED,
  entryCode,
  expiredError,
  fieldOf,
  isCompact,
  isLean,
  isStale,
  policyArgs,
  pushKeys,
  pushLean,
  RESEND,
  STALE_ATTEMPTS,
  staleError,
} from './wire'

/** `new RedisStore(client, { batch })`: `false` sends every call as its own script. */
export type BatchOption = boolean | { readonly maxSize?: number }

/**
 * Calls per batch script by default: past it the Redis time per decision no longer falls
 * (docs/benchmarks.md), while a longer script holds Redis, and every other client, for longer.
 */
export const DEFAULT_BATCH_SIZE = 64
/** The largest `maxSize` accepted: a batch script holds every other client of Redis while it runs. */
const MAX_BATCH_SIZE = 1024

/** The batch size an option asks for, or 0 (batching off). Throws ConfigError on a bad value. */
export function batchSize(option: BatchOption | undefined): number {
  if (option === undefined || option === true) return DEFAULT_BATCH_SIZE
  if (option === false) return 0
  if (typeof option !== 'object' || option === null) {
    throw new ConfigError('batch', 'false, true or { maxSize }', option, 'type')
  }
  const size = option.maxSize ?? DEFAULT_BATCH_SIZE
  if (!Number.isSafeInteger(size) || size < 1 || size > MAX_BATCH_SIZE) {
    throw new ConfigError('batch.maxSize', `an integer from 1 to ${MAX_BATCH_SIZE}`, size)
  }
  return size
}

const CONSUME = 'c'
const PEEK = 'p'
const REFUND = 'r'
type Op = typeof CONSUME | typeof PEEK | typeof REFUND

interface Call {
  readonly op: Op
  readonly entries: readonly StoreEntry[]
  /** One cost, or one per pair (then the call goes alone, after a '$' naming them). */
  readonly cost: PairCost
  readonly tags: readonly number[] | undefined
  /** A refund's spend id: it goes as op 'R' ('S' for a settlement), with the spend's refund-once marker. */
  readonly once: SpendOnce | undefined
  /** A consume's act-by time, server ms (0: no bound); see server-clock.ts. */
  readonly actBy: number
  /** Gets the call's reply or error. */
  readonly to: Settles<any>
}

/** How the batcher reaches Redis: the store's own paths, so retries, NOSCRIPT and readiness stay one. */
interface BatchTarget {
  readonly cluster: boolean
  run(script: Script, keys: string[], args: string[]): Promise<unknown>
  /** A batch of one goes as the call's own script. */
  single(
    op: Op,
    entries: readonly StoreEntry[],
    cost: PairCost,
    tags?: readonly number[],
    once?: SpendOnce,
    actBy?: number,
  ): Promise<unknown>
  /** Learns the server's time from each batch reply. */
  readonly clock: ServerClock
  /** Counts a call the script answered {@link EXPIRED}. */
  readonly expired: () => void
  /** The pattern table of a call's limiter (patterns.ts). */
  patterns(entries: readonly StoreEntry[]): PatternTable
  /** The version key of a call's slot. */
  versionKey(table: PatternTable, entries: readonly StoreEntry[]): string
  /** Reloads tables a batch found stale. */
  reload(tables: PatternTable[]): Promise<unknown>
}

/** One per store. Not exported from the package: `RedisStore` is its only user. */
export class Batcher {
  private queue: Call[] = []
  /** A call of this turn has gone out (or queued): later ones queue until the check phase. */
  private open = false
  /** A batch reply was settled in this turn (see {@link settleSoon}). */
  private settledThisTurn = false
  private readonly endTurn = () => {
    this.settledThisTurn = false
  }
  private readonly flushSoon = () => {
    this.open = false
    this.flush()
  }

  constructor(
    private readonly maxSize: number,
    private readonly target: BatchTarget,
  ) {}

  /**
   * Whether a call must queue (`true`: call {@link add}). The first call of a turn answers `false` and
   * goes out at once; it also arms the flush at the end of the turn.
   */
  busy(): boolean {
    if (this.open) return true
    this.open = true
    setImmediate(this.flushSoon)
    return false
  }

  add(
    op: Op,
    entries: readonly StoreEntry[],
    cost: PairCost,
    tags?: readonly number[],
    once?: SpendOnce,
    actBy = 0,
  ): Promise<any> {
    return new Promise((resolve, reject) =>
      this.enqueue(op, entries, cost, tags, once, actBy, { reply: resolve, reject }),
    )
  }

  /** {@link add} for a caller that settles its own promise: the outcome goes to `to`. */
  enqueue(
    op: Op,
    entries: readonly StoreEntry[],
    cost: PairCost,
    tags: readonly number[] | undefined,
    once: SpendOnce | undefined,
    actBy: number,
    to: Settles<any>,
  ): void {
    this.queue.push({ op, entries, cost, tags, once, actBy, to })
    if (this.queue.length >= this.maxSize) this.flush()
  }

  private flush(): void {
    const calls = this.queue
    if (calls.length === 0) return
    this.queue = []
    if (!this.target.cluster) {
      this.send(calls)
      return
    }
    // One script per hash slot (a queued call's keys all share one: cross-slot calls are not queued).
    const bySlot = new Map<number, Call[]>()
    for (const call of calls) {
      const slot = keySlot(call.entries[0]!.key)
      const group = bySlot.get(slot)
      if (group) group.push(call)
      else bySlot.set(slot, [call])
    }
    for (const group of bySlot.values()) this.send(group)
  }

  /**
   * Hands a batch reply to its callers. The first reply of a turn is settled at once; a later one of the
   * same turn two check phases later. Redis answers a pipelined client only once it has run every
   * command in its read buffer, so under load several batch replies arrive in one read; settled
   * together, their callers' next calls would all be handed to the client before any reached the socket
   * (node-redis writes in `setImmediate`), and Node and Redis would take turns, each idle while the
   * other works. Deferred past the client's write, the next batch is on its way to Redis while Node
   * settles the rest (ioredis writes at once, so it neither gains nor loses).
   */
  private settleSoon(calls: Call[], short: Uint8Array, reply: unknown): void {
    if (this.settledThisTurn) {
      holdReply(1) // no deadline check passes while a reply is held (deadlines.ts)
      setImmediate(() =>
        setImmediate(() => {
          holdReply(-1)
          this.resend(settle(calls, short, reply, this.target.expired))
        }),
      )
      return
    }
    this.settledThisTurn = true
    setImmediate(this.endTurn)
    this.resend(settle(calls, short, reply, this.target.expired))
  }

  /** Sends again, whole, the lean calls a batch answered {@link RESEND} (settle marked their pairs). */
  private resend(calls: Call[] | undefined): void {
    if (calls !== undefined) this.send(calls)
  }

  private send(calls: Call[], attempt = 0): void {
    if (calls.length === 1) {
      const c = calls[0]!
      this.target.single(c.op, c.entries, c.cost, c.tags, c.once, c.actBy).then(
        (value) => c.to.reply(value),
        (error) => c.to.reject(error),
      )
      return
    }
    const keys: string[] = []
    const args: string[] = []
    // The batch acts by its earliest consume's act-by: the script reads the time once, so a later bound
    // for some calls would let the earliest act after its caller was answered.
    let actBy = 0
    for (let c = 0; c < calls.length; c++) {
      const at = calls[c]!.actBy
      if (at > 0 && (actBy === 0 || at < actBy)) actBy = at
    }
    // every identity's control key once, first: the script reads them before any call ('~'), with
    // the pattern each identity matched ('='), after each limiter's pattern table version ('v')
    const controls = new Set<string>()
    let tables: PatternTable[] | undefined
    let matched: string[] | undefined
    for (let c = 0; c < calls.length; c++) {
      const call = calls[c]!
      if (call.op === REFUND) continue
      const mine = controlKeys(call.entries, controlOf)
      const table = this.target.patterns(call.entries)
      if (tables === undefined || !tables.includes(table)) {
        tables ??= []
        tables.push(table)
        keys.push(this.target.versionKey(table, call.entries))
        args.push('v', String(table.version))
      }
      for (const key of mine) {
        if (controls.has(key)) continue
        controls.add(key)
        const identity = table.empty ? undefined : identityOf(call.entries, key)
        const value = identity === undefined ? '' : table.match(identity)
        if (value !== '' || matched !== undefined) {
          matched ??= new Array<string>(controls.size - 1).fill('')
          matched.push(value)
        }
      }
    }
    if (actBy > 0) args.push('@', String(actBy))
    if (controls.size > 0) {
      if (matched !== undefined) args.push('=', String(matched.length), ...matched)
      args.push('~', String(controls.size))
      for (const key of controls) keys.push(key)
    }
    let code = entryCode(calls[0]!.entries[0]!)
    // Consumes and peeks without penalties (the common shapes) name policies declared once per batch
    // ('#'), and consecutive ones of one op, cost and policy list go as one run: 'x'/'y' cost policy
    // count for one-pair calls, 'm'/'q' cost n count policy... for n-pair ones. A batch of one limiter's
    // calls is its keys plus a few arguments, not 3 + 4 per pair per call. `short[i]`: call i went in a
    // one-pair run, and its reply has no leading allowed (2: a lean run, 'l', which may answer RESEND).
    const short = new Uint8Array(calls.length)
    let declared: Map<ResolvedPolicy, string> | undefined
    const declare = (e: StoreEntry): string => {
      const policy = e.policy
      declared ??= new Map()
      let ref = declared.get(policy)
      if (ref === undefined) {
        const pa = policyArgs(policy)
        if (entryCode(e) !== code) code = 0
        ref = String(declared.size + 1)
        declared.set(policy, ref)
        args.push('#', pa[0], pa[1], pa[2], pa[3])
      }
      return ref
    }
    let run = -1 // index in args of the open run's count
    let runCount = 0
    // what a call must share to join the open run: op, cost and its policies, in order
    let runOp: Op = CONSUME
    let runEntries: readonly StoreEntry[] = calls[0]!.entries
    let runCost = 0
    // a run of one compact pair's consumes whose pairs go lean ('l': two keys each, not four)
    let runLean = false
    for (let c = 0; c < calls.length; c++) {
      const call = calls[c]!
      const pen = call.op === REFUND ? undefined : penaltyArgs(call.entries)
      const cost = call.cost
      const perPair =
        typeof cost !== 'number' || (call.once !== undefined && typeof call.once.spent !== 'number')
      if (!pen && call.op !== REFUND && typeof cost === 'number') {
        const entries = call.entries
        const n = entries.length
        const first = entries[0]!
        const lean = n === 1 && call.op === CONSUME && isLean(first)
        if (lean) pushLean(keys, first)
        else for (let i = 0; i < n; i++) pushKeys(keys, entries[i]!)
        if (n === 1) short[c] = lean ? 2 : 1
        if (
          run >= 0 &&
          runOp === call.op &&
          runCost === cost &&
          runLean === lean &&
          samePolicies(runEntries, entries)
        ) {
          runCount++
          pushFields(args, entries)
          continue
        }
        if (run >= 0) args[run] = String(runCount)
        runLean = lean
        if (n === 1) {
          const ref = declare(first)
          args.push(lean ? 'l' : call.op === CONSUME ? 'x' : 'y', String(cost), ref, '')
          run = args.length - 1
        } else {
          const refs = new Array<string>(n)
          for (let i = 0; i < n; i++) refs[i] = declare(entries[i]!)
          args.push(call.op === CONSUME ? 'm' : 'q', String(cost), String(n), '')
          run = args.length - 1
          for (let i = 0; i < n; i++) args.push(refs[i]!)
        }
        pushFields(args, entries) // a compact pair's field follows its run's header, call after call
        runCount = 1
        runOp = call.op
        runEntries = entries
        runCost = cost
        continue
      }
      if (run >= 0) {
        args[run] = String(runCount)
        run = -1
      }
      // a call with penalties goes as op 'C' / 'P', its penalty keys after its pair keys; a refund as
      // 'r', or as 'R' when it names its spend ('S' for a settlement), its marker key after its pair keys
      const op = call.once?.settle ? 'S' : pen || call.once ? call.op.toUpperCase() : call.op
      const n = call.entries.length
      if (perPair) {
        // each pair's cost (and, for a refund that names its spend, each pair's whole spend) first
        args.push('$', String(call.once ? 2 * n : n))
        for (let i = 0; i < n; i++) args.push(String(costAt(cost, i)))
        if (call.once) for (let i = 0; i < n; i++) args.push(String(costAt(call.once.spent, i)))
      }
      args.push(op, perPair ? '0' : String(cost), String(n))
      for (let i = 0; i < call.entries.length; i++) {
        const e = call.entries[i]!
        pushKeys(keys, e)
        const pa = policyArgs(e.policy)
        if (entryCode(e) !== code) code = 0
        args.push(pa[0], pa[1], pa[2], isCompact(e) ? e.field : pa[3])
        if (call.tags) args.push(String(call.tags[i]))
      }
      if (pen) {
        for (const e of call.entries) if (e.policy.penalty) keys.push(penaltyKey(e.key))
        for (const a of pen) args.push(a)
      }
      if (call.once) {
        keys.push(refundMarkerKey(call.entries[0]!.key, call.once.id))
        args.push(perPair ? '0' : String(call.once.spent))
      }
    }
    if (run >= 0) args[run] = String(runCount)
    const script = BY_ALGORITHM[code]?.batch ?? BATCH
    this.target.run(script, keys, args).then(
      (reply) => {
        if (isStale(reply) && tables !== undefined) {
          // a pattern change this process missed: nothing was decided; reload and send the batch again
          if (attempt === STALE_ATTEMPTS) {
            const error = staleError()
            for (const c of calls) c.to.reject(error)
            return
          }
          this.target.reload(tables).then(
            () => this.send(calls, attempt + 1),
            (error) => {
              for (const c of calls) c.to.reject(error)
            },
          )
          return
        }
        this.target.clock.learn(reply)
        this.settleSoon(calls, short, reply)
      },
      (error) => {
        for (const c of calls) c.to.reject(error)
      },
    )
  }
}

/** The identity of the entry whose control key is `key`. */
function identityOf(entries: readonly StoreEntry[], key: string): string | undefined {
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!
    if (entries.length === 1 || controlOf(e) === key) return e.identity
  }
  return undefined
}

/** A call's compact fields, in pair order (after a run's header: lua/entries/batch.lua). */
function pushFields(args: string[], entries: readonly StoreEntry[]): void {
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!
    if (isCompact(e)) args.push(fieldOf(e))
  }
}

/** Whether two calls name the same policies in the same order (so one run can carry both). */
function samePolicies(a: readonly StoreEntry[], b: readonly StoreEntry[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i]!.policy !== b[i]!.policy) return false
  return true
}

/**
 * Hands each call its part of the batch reply (see lua/entries/batch.lua for the layout); returns the
 * lean calls answered {@link RESEND}, their pairs now sent whole, to go again.
 */
function settle(
  calls: readonly Call[],
  short: Uint8Array,
  reply: unknown,
  expired: () => void,
): Call[] | undefined {
  if (!Array.isArray(reply)) {
    const error = new StoreError(`unexpected batch reply: ${JSON.stringify(reply)?.slice(0, 200)}`)
    for (const c of calls) c.to.reject(error)
    return undefined
  }
  const nowUs = Number(reply[0])
  let at = 1
  let again: Call[] | undefined
  for (let ci = 0; ci < calls.length; ci++) {
    const c = calls[ci]!
    const status = Number(reply[at])
    if (status === RESEND && short[ci] === 2) {
      ;(c.entries[0] as CompactEntry).whole = true
      again ??= []
      again.push(c)
      at += 5
    } else if (status === -1) {
      c.to.reject(new StoreError(`batch script failed for one call: ${String(reply[at + 1])}`))
      at += 2
    } else if (status === EXPIRED) {
      expired()
      c.to.reject(expiredError())
      at += 1
    } else if (short[ci] !== 0) {
      if (at + 5 > reply.length) {
        c.to.reject(new StoreError(`batch reply too short: ${JSON.stringify(reply).slice(0, 200)}`))
        continue
      }
      // a one-pair call's reply has no leading allowed: its status is the pair's own
      c.to.reply({ nowUs, results: decodePairs(reply, at, 1), batchSize: calls.length } satisfies StoreReply)
      at += 5
    } else if (c.op === REFUND) {
      c.to.reply(nowUs)
      at += 1
    } else {
      const n = c.entries.length
      if (at + 1 + 5 * n > reply.length) {
        c.to.reject(new StoreError(`batch reply too short: ${JSON.stringify(reply).slice(0, 200)}`))
        continue
      }
      c.to.reply({
        nowUs,
        results: decodePairs(reply, at + 1, n),
        batchSize: calls.length,
      } satisfies StoreReply)
      at += 1 + 5 * n
    }
  }
  return again
}

export { CONSUME as BATCH_CONSUME, type Op as BatchOp, PEEK as BATCH_PEEK, REFUND as BATCH_REFUND }
