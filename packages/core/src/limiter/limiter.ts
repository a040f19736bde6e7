/**
 * `RateLimiter`: one or several named policies, checked and charged together in one atomic store call.
 * The class orchestrates; each concern lives beside it in this folder.
 * @module
 */

import type { AllowOptions, BlockEntry, BlockOptions } from '../controls'
import { isFree } from '../cost'
import { type Deadlines, monotonicMs } from '../deadlines'
import { brand, InputError, isBranded } from '../errors'
import { DECISION_CHANNEL, type TollgateEvent } from '../events'
import { CallKeys, validatePrefix } from '../keys'
import { LimitOverrides } from '../limits'
import { checkOptions } from '../options'
import { register } from '../registry'
import type {
  CallOptions,
  Decision,
  KeyInput,
  ResolvedPolicy,
  Store,
  StoreEntry,
  StoreErrorPolicy,
} from '../types'
import { checkRecord, costOf } from './amounts'
import { Blocks } from './blocks'
import type { CircuitBreaker } from './breaker'
import { CALL_OPTIONS, checkCall, noOptions } from './call-options'
import type { DecisionContext } from './decision'
import { DenyCache, DenyCacheStage } from './deny-cache'
import { Fallback } from './fallback'
import { type Attempt, LIMITER_OPTIONS, MIB, type RateLimiterOptions, type WaitOptions } from './options'
import { Overrides } from './overrides'
import { PenaltyStage } from './penalties'
import { Pipeline } from './pipeline'
import { type PolicySet, parsePolicies } from './policies'
import { Reserves } from './reserve'
import { ReserveDraw, ReserveTake } from './reserve-stage'
import { ShadowStage } from './shadow'
import {
  heldLeases,
  refundAmount,
  released,
  settleDelta,
  spendOnce,
  spentEntries,
  spentFromStore,
} from './spend'
import { type Call, type Stage, signatureOf } from './stage'
import { StoreCalls } from './store-calls'
import type { StorePath } from './store-path'
import { type TopEntry, TopTally } from './top'
import * as waiting from './wait'

/** The keys a limiter keeps reserved units for at most (the keys refilled longest ago go first). */
const RESERVED_KEYS = 10_000

/**
 * A distributed rate limiter. Every call is one atomic round trip to the store (with `reserve`, one
 * per refill of a key's units: docs/reserve.md).
 *
 * @example
 * const api = new RateLimiter({ store, limit: 100, window: '1m' })
 * const d = await api.consume('user:42')
 * if (!d.allowed) console.log(`retry in ${d.retryAfterMs} ms`)
 */
export class RateLimiter {
  static {
    brand(RateLimiter, 'RateLimiter')
  }
  /**
   * Recognises a limiter from either build of the package (ESM or CommonJS) and from another installed
   * copy, so an adapter accepts whichever one the application made.
   */
  static [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass instanceof asks about
    return isBranded(this, value)
  }
  readonly store: Store
  /** What metrics and events call this limiter. */
  readonly name: string
  readonly prefix: string
  /** The validated policies, in declaration order. */
  readonly policies: readonly ResolvedPolicy[]
  readonly onStoreError: StoreErrorPolicy
  /**
   * The circuit breaker guarding the store (its `state` is readable). On a cluster store, each primary
   * gets its own breaker with the same settings (see {@link RateLimiter.breakerFor}); this one guards calls
   * the store does not place.
   */
  readonly breaker: CircuitBreaker
  /**
   * Whether a policy is a concurrency limit: its admitted decisions hold leases that `release()` ends.
   * Adapters read it to release when a response ends.
   */
  readonly leases: boolean
  /**
   * The deadline queue of this limiter's store calls (one timer for all of them). The HTTP layer puts
   * async `key` and `cost` functions on it too, so a function that never settles cannot hang a request.
   * @internal
   */
  readonly deadlines: Deadlines
  /** Every store call goes through it: deadline, breakers, events. */
  private readonly calls: StoreCalls
  /** The failure policy's answers. */
  private readonly fallback: Fallback
  /** The `onEvent` option: the HTTP layer reports an app function's bad answer through it. @internal */
  readonly onEvent: ((event: TollgateEvent) => void) | undefined
  /** Builds each call's store entries (keys.ts: the only place keys are built). */
  private readonly keys: CallKeys
  /** What decisions depend on: shadow names, policies by name, per-call limits. */
  private readonly ctx: DecisionContext
  /** The policies and what calls read of them. */
  private readonly set: PolicySet
  /** The configured features (reserve, deny cache, penalties, shadow) around the store call. */
  private readonly pipeline: Pipeline
  /** Whether a stage keys its state by the call's signature (the deny cache, the reserve). */
  private readonly signed: boolean
  /** The refusals counted for {@link RateLimiter.top}, unless `top: false` or the store keeps none. */
  private readonly tally: TopTally | undefined
  private readonly controls: Blocks
  /**
   * Per-identity limits kept in the store, applied by the decision script on every process's next call:
   * `set`, `get`, `list`, `delete` (docs/quotas.md).
   */
  readonly overrides: Overrides

  constructor(options: RateLimiterOptions) {
    checkOptions(options, LIMITER_OPTIONS)
    const {
      store,
      name,
      shadow = false,
      prefix = 'tollgate',
      policies: named,
      timeoutMs = 500,
      onStoreError = 'allow',
      localShare = 1,
      localCapacity = {},
      breaker = {},
      denyCache = {},
      onEvent,
      top = {},
      ...inline
    } = options
    if (store === undefined) LIMITER_OPTIONS.store(store, 'store')
    this.store = store
    this.prefix = validatePrefix(prefix)
    this.name = name ?? this.prefix
    const set = parsePolicies(named, inline, shadow)
    const { policies, shadowNames } = set
    this.set = set
    this.policies = policies
    this.leases = set.leases
    this.keys = new CallKeys(this.prefix, policies, named === undefined)
    // Another live limiter on this store and prefix with other policies: refused here, never per request.
    register(this, store, this.prefix, this.name, policies, named === undefined)
    this.ctx = { shadowNames, policyByName: set.byName, overrides: new LimitOverrides(policies, set.byName) }
    this.onStoreError = onStoreError
    this.onEvent = onEvent
    const { failures = 3, cooldownMs = 1000 } = breaker
    this.calls = new StoreCalls(store, this.name, this.prefix, onEvent, timeoutMs, { failures, cooldownMs })
    this.deadlines = this.calls.deadlines
    this.breaker = this.calls.breakers.main
    const local = { share: localShare, capacity: localCapacity }
    this.fallback = new Fallback(this.ctx, policies, local, this.leases, this.calls, onEvent)
    const via: StorePath = { calls: this.calls, store, ctx: this.ctx, fallback: this.fallback }
    // In order: a reserved call is drawn first, a remembered refusal answers before any refill, and the
    // `after` hooks run backwards (shadow's second call, penalties, then the deny cache remembers).
    let cache: DenyCache<Decision> | undefined
    if (denyCache !== false) {
      const { maxEntries = 10_000, maxBytes = 4 * MIB, maxMs = 1000 } = denyCache
      cache = new DenyCache(maxEntries, maxBytes, maxMs)
    }
    const reserves = set.reserves && new Reserves(set.reserves, RESERVED_KEYS, cache)
    const stages: Stage[] = []
    if (reserves) stages.push(new ReserveDraw(reserves))
    if (cache) stages.push(new DenyCacheStage(cache, this.leases, this))
    if (reserves) stages.push(new ReserveTake(reserves, via))
    if (set.penalised) stages.push(new PenaltyStage())
    if (shadowNames) stages.push(new ShadowStage(shadowNames, via))
    if (top !== false && store.topSets !== undefined) {
      this.tally = new TopTally(store.topSets, this.prefix, policies, top.maxIdentities ?? 1000)
      stages.push(this.tally)
    }
    this.pipeline = new Pipeline(stages, via, this, set)
    const entriesOf = (id: string) => this.keys.entries(id)
    this.controls = new Blocks(store.controls, this.prefix, this.calls, entriesOf, stages)
    const target = { byName: set.byName, single: named === undefined }
    this.overrides = new Overrides(store.controls, this.prefix, target, this.calls, entriesOf, stages)
    this.signed = cache !== undefined || reserves !== undefined
  }

  /**
   * Spends `cost` units (default 1) on every policy, or on none if any refuses.
   * A refusal is a decision with `allowed: false`, not an exception.
   *
   * @example
   * await login.consume({ ip: `ip:${ip}`, account: `email:${email}` }, { cost: 1 })
   */
  consume(key: KeyInput, options?: CallOptions): Promise<Decision> {
    let call: Call
    try {
      call = this.open(key, options, true)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.pipeline.consume(call)
  }

  /** The state without spending: `remaining` before any spend, `allowed` = would `cost` be admitted now. */
  peek(key: KeyInput, options?: CallOptions): Promise<Decision> {
    let call: Call
    try {
      call = this.open(key, options, false)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.pipeline.peek(call)
  }

  /**
   * Gives an admitted decision's spend back (all of it, or `cost` of it). Never below zero usage, never
   * into a newer window than the one the spend was made in. A refused decision spent nothing: no-op.
   * At most once per spend: refunds of one decision (repeated, retried after a timeout, or from several
   * places such as `skipFailedRequests` and the app) give back at most its cost in total, recorded in the
   * store itself. Of the call options only `cost` is read (the others are checked and ignored, so the
   * options of the spend can be passed again).
   */
  async refund(decision: Decision, options?: CallOptions): Promise<void> {
    checkCall(options, CALL_OPTIONS)
    const token = decision?.refundToken
    if (!decision?.allowed || !token || !spentFromStore(decision)) return
    const { entries, tags } = spentEntries(decision, token, false, this.set.byName, this.ctx.overrides)
    const charged = token.costs ?? token.cost
    const asked = options?.cost
    if (asked !== undefined && (typeof options !== 'object' || options === null))
      throw new InputError('options', 'an object', options)
    const cost = refundAmount(asked, entries, charged, this.set.byName)
    if (isFree(cost)) return
    // a draw too goes back to the store, in the window its units were taken in: the marker there keeps
    // it once for every copy of the decision
    const once = spendOnce(token, charged)
    await this.calls.run(entries, () => this.store.refund(entries, tags, cost, once), 'refund')
    for (const stage of this.pipeline.stages) stage.refunded?.(decision, token, cost)
  }

  /**
   * Makes an admitted decision's spend `actualCost`, for costs known only once the work is done (LLM
   * tokens, query cost, bytes): the difference is charged, or given back, on every rate policy of the
   * decision at once, in one round trip. A record settles the policies it names (each becomes its value)
   * and leaves the others as charged. Charging past the limit is allowed (the work already happened):
   * the identity is refused until the overdraft drains, as each algorithm defines it (docs/settle.md).
   * Bound to the window the spend was made in, like a refund. At most once per spend: a settle
   * repeated or retried, or one after a refund of the same decision, changes nothing more, and a refund
   * after a settle gives nothing back. Concurrency leases are left alone (`release()` ends them). A
   * refused decision, one with cost 0, or one the failure policy answered: no-op.
   *
   * @example
   * const d = await ai.consume(`key:${apiKey}`, { cost: { tokens: estimate } })
   * const reply = await upstream(request)
   * await ai.settle(d, { tokens: reply.usage.total_tokens })
   */
  async settle(decision: Decision, actualCost: number | Readonly<Record<string, number>>): Promise<void> {
    if (typeof actualCost !== 'number') checkRecord(actualCost, 'actualCost', this.set.byName)
    else if (!Number.isSafeInteger(actualCost) || actualCost < 0)
      throw new InputError('actualCost', 'a non-negative safe integer', actualCost)
    const token = decision?.refundToken
    if (!decision?.allowed || !token || !spentFromStore(decision)) return
    const spent = spentEntries(decision, token, true, this.set.byName, this.ctx.overrides)
    const { entries, tags } = spent
    if (entries.length === 0) return
    const settled = settleDelta(token, spent, actualCost)
    const once = spendOnce(token, settled.spent, true)
    await this.calls.run(entries, () => this.store.refund(entries, tags, settled.delta, once), 'settle')
  }

  /**
   * Ends the leases an admitted decision holds on this limiter's concurrency policies (its rate policies
   * keep their spend): the slots are free again for every process. Call it once the request or job is
   * over, however it ended; the adapters do it when the response ends, `attempt()` when its callback
   * settles. Harmless to repeat, after the lease expired, or on a decision that holds no lease (a refusal,
   * a limiter without concurrency policies). An unreleased lease frees itself after `lease`.
   *
   * @example
   * const d = await jobs.wait(`tenant:${id}`)
   * try { await runJob() } finally { await jobs.release(d) }
   */
  async release(decision: Decision): Promise<void> {
    // biome-ignore lint/complexity/noArguments: a JavaScript caller's options, refused rather than ignored
    if (arguments.length > 1) noOptions(arguments[1], 'release')
    const token = decision?.refundToken
    if (!this.leases || !decision?.allowed || !token || released.has(token)) return
    const local = decision.source === 'fallback'
    const leases = heldLeases(decision, token, local ? this.fallback.policies : this.set.byName)
    if (leases === undefined) return
    released.add(token)
    const { entries, tags, cost } = leases
    if (local) return this.fallback.release(entries, tags, cost)
    try {
      await this.calls.run(entries, () => this.store.refund(entries, tags, cost), 'release')
    } catch (error) {
      released.delete(token) // not applied (or not known to be): a retry may still end the lease early
      throw error
    }
  }

  /**
   * Spends first, then runs `fn`; `fn` may refund (e.g. only failed logins count). Throws
   * `RateLimitedError` without running `fn` when refused. Leases taken by concurrency policies are
   * released when `fn` settles, whether it returns or throws (a store error on that release is left to
   * the lease's expiry).
   *
   * @example
   * await login.attempt({ ip, account }, async (a) => { if (await checkPassword()) await a.refund() })
   */
  attempt<T>(key: KeyInput, fn: (attempt: Attempt) => T | Promise<T>, options?: CallOptions): Promise<T> {
    return waiting.attempt(this, key, fn, options)
  }

  /**
   * Consumes, sleeping `retryAfterMs` between refusals until admitted. Throws `RateLimitTimeoutError`
   * (without sleeping) when the next wait would pass `maxWaitMs` or can never succeed.
   */
  wait(key: KeyInput, options: WaitOptions = {}): Promise<Decision> {
    return waiting.wait(this, key, options)
  }

  /**
   * The identities this limiter refused most, per policy, in each policy's current and previous period
   * (its window, at least a second): `[{ identity, policy, refused }]`, most refused first, at most
   * `limit` (default 10). Refusals reach the store about once a second; this call adds this process's
   * pending ones first. Every process of the fleet counts into the same sets. See docs/observability.md.
   *
   * @example
   * for (const { identity, policy, refused } of await api.top({ limit: 5 })) console.log(identity, policy, refused)
   */
  top(options?: { limit?: number; policy?: string }): Promise<TopEntry[]> {
    if (this.tally === undefined) {
      const why =
        this.store.topSets === undefined ? 'a store that keeps top sets' : 'the `top` option not false'
      return Promise.reject(new InputError('top', `a limiter with ${why}`, 'unavailable'))
    }
    return this.tally.top(options)
  }

  /** Refuses every call naming `identity` for `for` (source 'block', nothing spent), everywhere: docs/blocks.md. */
  block(identity: string, options: BlockOptions): Promise<void> {
    return this.controls.block(identity, options)
  }
  /** Lifts a block: at once in this process, on the next call elsewhere. */
  unblock(identity: string): Promise<void> {
    return this.controls.unblock(identity)
  }
  /** The live blocks of this prefix, `[{ identity, reason, expiresInMs }]`, at most `limit` (1000). */
  blocks(options?: { limit?: number }): Promise<BlockEntry[]> {
    return this.controls.list(options)
  }
  /** Admits calls whose every identity is allowed, without spending, for `for`: docs/blocks.md. */
  allow(identity: string, options: AllowOptions): Promise<void> {
    return this.controls.allow(identity, options)
  }
  /** Ends an allow entry. */
  unallow(identity: string): Promise<void> {
    return this.controls.unallow(identity)
  }
  /** Forgets the state of every policy for this key. */
  async reset(key: KeyInput): Promise<void> {
    // biome-ignore lint/complexity/noArguments: a JavaScript caller's options, refused rather than ignored
    if (arguments.length > 1) noOptions(arguments[1], 'reset')
    const entries = this.keys.entries(key)
    const signature = signatureOf(entries)
    for (const stage of this.pipeline.stages) stage.forget?.(signature)
    await this.calls.run(entries, () => this.store.reset(entries), 'reset')
  }

  /** The Redis keys a call would touch (for debugging and the script contract docs). */
  keysFor(key: KeyInput): string[] {
    // biome-ignore lint/complexity/noArguments: a JavaScript caller's options, refused rather than ignored
    if (arguments.length > 1) noOptions(arguments[1], 'keysFor')
    return this.keys.entries(key).map((e) => e.key)
  }

  /** The breaker for a call: the store's scope for it (a cluster primary), or the limiter's own. */
  breakerFor(entries: readonly StoreEntry[]): CircuitBreaker {
    return this.calls.breakerFor(entries)
  }

  /** A consume's (`spends`) or a peek's call: its options checked, its entries with per-call `limits`. */
  private open(key: KeyInput, options: CallOptions | undefined, spends: boolean): Call {
    checkCall(options, CALL_OPTIONS)
    const cost = costOf(options, this.policies, this.set.byName)
    const keyed = this.keys.entries(key)
    const limits = options?.limits
    const entries = limits === undefined ? keyed : this.ctx.overrides.apply(keyed, limits)
    return {
      entries,
      cost,
      options,
      // a peek's time is read only for the decision channel's duration
      started: spends || DECISION_CHANNEL?.hasSubscribers ? monotonicMs() : 0,
      policy: options?.onStoreError ?? this.onStoreError,
      allShadow: options?.shadow === true || this.set.shadowAll,
      signature: this.signed ? signatureOf(entries) : '',
      reserved: false,
      cacheable: true,
    }
  }
}
