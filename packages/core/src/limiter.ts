/**
 * `RateLimiter`: one or several named policies, checked and charged together in one atomic store call.
 * @module
 */
import { resolvePolicy } from './algorithms'
import type { ConcurrencyPolicyOptions } from './algorithms/concurrency'
import { collapse, costAt, isFree, maxCost, pickCost } from './cost'
import {
  brand,
  ConfigError,
  InputError,
  isBranded,
  RateLimitedError,
  RateLimitTimeoutError,
  StoreError,
  StoreTimeoutError,
} from './errors'
import {
  CHANNELS,
  DECISION_CHANNEL,
  type DecisionMessage,
  emit,
  type StoreCallContext,
  storeTraced,
  type TollgateEvent,
  traceStore,
  WAIT_CHANNEL,
  type WaitMessage,
} from './events'
import {
  type BreakerOptions,
  type CallWatch,
  CircuitBreaker,
  Deadlines,
  DenyCache,
  monotonicMs,
} from './failure'
import { base64Url } from './hash'
import { CallKeys, MAX_POLICIES, SINGLE_POLICY, validatePrefix } from './keys'
import { LimitOverrides } from './limits'
import { check, checkOptions, knownOption, type OptionCheck, oneOf, STORE_ERROR_POLICIES } from './options'
import { BLOCKED_TAG } from './penalty'
import { register } from './registry'
import { storeFaultOf } from './store-fault'
import { MemoryStore } from './stores/memory-store'
import type {
  Algorithm,
  CallOptions,
  Decision,
  Duration,
  KeyInput,
  PairCost,
  PolicyDecision,
  PolicyOptions,
  RefundToken,
  ResolvedPolicy,
  Store,
  StoreEntry,
  StoreErrorPolicy,
  StoreReply,
} from './types'

/** Options of {@link RateLimiter}: either one policy inline, or named `policies`. */
export interface RateLimiterOptions {
  /** Where state lives: a `RedisStore` (shared by every process) or a `MemoryStore`. */
  store: Store
  /**
   * What metrics and events call this limiter (the `limiter` label). Letters, digits, `_ . : -`, up to
   * 64 characters; never an identity.
   * @default the prefix
   */
  name?: string
  /**
   * Shadow mode for every policy: decide, count and report "would have refused" (`decision.shadow`,
   * the `shadow_refused` outcome in metrics), but never refuse. A single policy can be in shadow with
   * `policies: { name: { ..., shadow: true } }`. See docs/observability.md#shadow-mode.
   * @default false
   */
  shadow?: boolean
  /**
   * First part of every key. Limiters that share a prefix and a policy name share state.
   * @default 'tollgate'
   */
  prefix?: string
  /** One policy: units per window. */
  limit?: number
  /** One policy: window length. */
  window?: Duration
  /** One policy. @default 'sliding-window' */
  algorithm?: Algorithm
  /** One policy: capacity for token-bucket and gcra. @default limit */
  burst?: number
  /** One policy: block an identity it keeps refusing (see {@link PolicyOptions.penalty}). @default none */
  penalty?: PolicyOptions['penalty']
  /**
   * One policy: most units in flight at once (a concurrency limit; see {@link ConcurrencyPolicyOptions}).
   * Release each admitted decision with `release()` (the adapters do it when the response ends).
   */
  concurrency?: number
  /** One concurrency policy: how long an unreleased slot stays taken. @default '60s' */
  lease?: Duration
  /**
   * Several policies, applied together. The names appear in keys and in the RateLimit headers. A policy
   * is a rate (`{ limit, window }`) or a concurrency limit (`{ concurrency, lease }`).
   */
  policies?: Record<string, PolicyOptions | ConcurrencyPolicyOptions>
  /**
   * Deadline of every store call, enforced by Tollgate whatever the client's own settings (its offline
   * queue included). A call past it has an unknown outcome and is never retried.
   * @default 500
   */
  timeoutMs?: number
  /**
   * What to do when the store fails or the breaker is open: `'allow'` (admit, no quota numbers),
   * `'deny'` (refuse; adapters answer 503), `'local'` (an in-process limiter with `localShare` of the quota).
   * Overridable per call and per route.
   * @default 'allow'
   */
  onStoreError?: StoreErrorPolicy
  /**
   * The share of each policy's quota the `'local'` fallback grants per process: set it to
   * 1 / (number of instances) so the fleet stays within the quota while the store is down.
   * @default 1
   */
  localShare?: number
  /**
   * How much the `'local'` fallback keeps (it is a `MemoryStore`, created at the first fallback). When
   * full it refuses identities it does not hold yet rather than forget a live counter, so a flood of
   * fresh identities cannot buy an identity at its limit a new quota. See docs/failure-modes.md.
   * @default { maxKeys: 10000, maxBytes: 4194304 }
   */
  localCapacity?: { maxKeys?: number; maxBytes?: number }
  /** Circuit breaker. @default { failures: 3, cooldownMs: 1000 } */
  breaker?: BreakerOptions
  /**
   * Remember refusals in-process, so hammering a closed gate costs no round trip: until their retry time,
   * but at most `maxMs`, so a `reset()` in another process (or keys deleted in Redis) is seen everywhere
   * within `maxMs`. Bounded by `maxEntries` and `maxBytes` (the oldest go first). `false` turns it off.
   * @default { maxEntries: 10000, maxBytes: 4194304, maxMs: 1000 }
   */
  denyCache?: false | { maxEntries?: number; maxBytes?: number; maxMs?: number }
  /** Receives store errors, timeouts, breaker changes, fallback decisions and cache hits. */
  onEvent?: (event: TollgateEvent) => void
}

/** Options of {@link RateLimiter.wait}. */
export interface WaitOptions extends CallOptions {
  /**
   * Longest total time to wait. A wait that would pass it throws `RateLimitTimeoutError` at once,
   * without sleeping.
   * @default 60000
   */
  maxWaitMs?: number
  /** Aborts the wait (rejects with the signal's reason). */
  signal?: AbortSignal
  /**
   * While only concurrency policies refuse, how often to try again: a slot frees when its holder
   * releases it, which no retry time predicts (their `retryAfterMs` is when a lease expires at the latest).
   * @default 100
   */
  pollMs?: number
  /**
   * Spreads retries of many waiters refused together: each sleep is `retryAfterMs` plus a random extra of
   * up to `jitter` x `retryAfterMs` (never less than `retryAfterMs`, which would only be refused again;
   * never past `maxWaitMs`). A number in [0, 1].
   * @default 0
   */
  jitter?: number
}

/** What `attempt()` hands to its callback. */
export interface Attempt {
  readonly decision: Decision
  /** Gives the spend back (e.g. the login succeeded). Awaited before `attempt()` resolves. */
  refund(): Promise<void>
}

const MIB = 1024 * 1024
const NAME = /^[\w.:-]{1,64}$/

/**
 * Every option of {@link RateLimiterOptions} with its check (options.ts). The HTTP layer checks inline
 * limiter options with the same schema, so a mistake reads the same from the core and every adapter.
 * `prefix` and the policy options are checked where they are parsed (keys.ts, algorithms).
 */
export const LIMITER_OPTIONS = {
  store(value, option) {
    const s = value as Partial<Store> | null
    if (
      typeof s !== 'object' ||
      s === null ||
      typeof s.consume !== 'function' ||
      typeof s.refund !== 'function'
    )
      throw new ConfigError(option, 'a Store (new RedisStore(client) or new MemoryStore())', value, 'type')
  },
  name(value, option) {
    if (typeof value !== 'string' || !NAME.test(value))
      throw new ConfigError(option, 'letters, digits, _ . : - (1 to 64 characters)', value, 'type')
  },
  shadow: check.bool,
  prefix: check.any,
  limit: check.any,
  window: check.any,
  algorithm: check.any,
  burst: check.any,
  penalty: check.any,
  concurrency: check.any,
  lease: check.any,
  policies: check.any,
  timeoutMs: check.positiveMs,
  onStoreError: check.oneOf(STORE_ERROR_POLICIES),
  localShare(value, option) {
    if (typeof value !== 'number' || !(value > 0 && value <= 1))
      throw new ConfigError(option, 'a number in (0, 1]: 1 / the number of instances', value)
  },
  localCapacity: check.nested({ maxKeys: check.positiveInt, maxBytes: check.positiveInt }),
  breaker: check.nested({ failures: check.positiveInt, cooldownMs: check.positiveMs }),
  denyCache(value, option) {
    if (value === false) return
    if (typeof value !== 'object' || value === null)
      throw new ConfigError(option, 'false or { maxEntries, maxBytes, maxMs }', value, 'type')
    checkOptions(
      value,
      { maxEntries: check.positiveInt, maxBytes: check.positiveInt, maxMs: positiveOrInfiniteMs },
      option,
      `${option}.`,
    )
  },
  onEvent: check.fn,
} as const satisfies Record<keyof RateLimiterOptions, OptionCheck>

function positiveOrInfiniteMs(value: unknown, option: string): void {
  check.positiveMs(value, option, true)
}

/** Most policies one limiter may have (defined with the keys: it also bounds a call's identities). */
export { MAX_POLICIES }

// Heap bytes of a cached refusal (the decision and its array) and of each policy's part, measured on V8
// (Node 20) and rounded up; the cache adds its entry and the signature.
const DECISION_BYTES = 208
const POLICY_DECISION_BYTES = 200
// Breakers kept per store scope (cluster primaries); scopes are node addresses, not request input.
const MAX_SCOPES = 1024
const MAX_SCOPE_BYTES = 512 * 1024
const SCOPE_BYTES = 320 // a breaker, its closure and the Map entry, besides the address

/**
 * A distributed rate limiter. Every call is one atomic round trip to the store.
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
  /** The same policies by name (built once: refunds and per-policy keys look them up per call). */
  private readonly policyByName: ReadonlyMap<string, ResolvedPolicy>
  readonly onStoreError: StoreErrorPolicy
  /**
   * The circuit breaker guarding the store (its `state` is readable). On a cluster store, each primary
   * gets its own breaker with the same settings (see {@link RateLimiter.breakerFor}); this one guards calls
   * the store does not place.
   */
  readonly breaker: CircuitBreaker
  private readonly scopedBreakers = new Map<string, CircuitBreaker>()
  private scopeBytes = 0
  private readonly breakerSettings: { failures: number; cooldownMs: number }
  /**
   * The deadline queue of this limiter's store calls (one timer for all of them). The HTTP layer puts
   * async `key` and `cost` functions on it too, so a function that never settles cannot hang a request.
   * @internal
   */
  readonly deadlines: Deadlines
  private readonly denyCache: DenyCache<Decision> | undefined
  private readonly onEvent: ((event: TollgateEvent) => void) | undefined
  private readonly localPolicies: ReadonlyMap<string, ResolvedPolicy>
  private readonly localCapacity: { maxKeys: number; maxBytes: number }
  private localStore: MemoryStore | undefined
  /** Builds each call's store entries (keys.ts: the only place keys are built). */
  private readonly keys: CallKeys
  /** Policy names, declaration order (published with each decision; a fallback answer has no pairs). */
  private readonly policyNames: readonly string[]
  /** Each policy's algorithm, parallel to `policyNames` (published with each decision). */
  private readonly policyAlgorithms: readonly Algorithm[]
  /** Names of the policies in shadow (undefined: none). */
  private readonly shadowNames: ReadonlySet<string> | undefined
  /** Every policy in shadow (then one store call decides, as without shadow). */
  private readonly shadowAll: boolean
  /** Some policy has a penalty. */
  private readonly penalised: boolean
  /** Per-call `limits`: the overridden policies, cached per value. */
  private readonly overrides: LimitOverrides
  private readonly localShare: number
  /**
   * Whether a policy is a concurrency limit: its admitted decisions hold leases that `release()` ends.
   * Adapters read it to release when a response ends.
   */
  readonly leases: boolean

  constructor(options: RateLimiterOptions) {
    checkOptions(options, LIMITER_OPTIONS)
    const {
      store,
      name,
      shadow = false,
      prefix = 'tollgate',
      policies,
      timeoutMs = 500,
      onStoreError = 'allow',
      localShare = 1,
      localCapacity = {},
      breaker = {},
      denyCache = {},
      onEvent,
      ...inline
    } = options
    if (store === undefined) LIMITER_OPTIONS.store(store, 'store')
    this.store = store
    this.prefix = validatePrefix(prefix)
    this.name = name ?? this.prefix
    const hasInline = Object.values(inline).some((v) => v !== undefined)
    if (policies !== undefined) {
      if (hasInline) {
        throw new ConfigError(
          'policies',
          'given alone (not with limit/window/algorithm/burst/penalty)',
          Object.keys(inline),
          'type',
        )
      }
      if (typeof policies !== 'object' || policies === null || Object.keys(policies).length === 0) {
        throw new ConfigError('policies', 'a non-empty object of named policies', policies, 'type')
      }
      const count = Object.keys(policies).length
      if (count > MAX_POLICIES) {
        throw new ConfigError('policies', `at most ${MAX_POLICIES} named policies`, `${count} policies`)
      }
      const shadowed: string[] = []
      this.policies = Object.entries(policies).map(([policy, p]) => {
        // `shadow` is the limiter's concern, not the store's: strip it before the policy is resolved.
        if (typeof p === 'object' && p !== null && 'shadow' in p) {
          const { shadow: policyShadow, ...rest } = p
          check.bool(policyShadow, `policies.${policy}.shadow`)
          if (policyShadow) shadowed.push(policy)
          return resolvePolicy(policy, rest, `policies.${policy}.`)
        }
        return resolvePolicy(policy, p, `policies.${policy}.`)
      })
      if (shadowed.length > 0 && !shadow) this.shadowNames = new Set(shadowed)
    } else {
      this.policies = [resolvePolicy(SINGLE_POLICY, inline, '')]
    }
    this.keys = new CallKeys(this.prefix, this.policies, policies === undefined)
    // Another live limiter on this store and prefix with other policies: refused here, never per request.
    register(this, store, this.prefix, this.name, this.policies, policies === undefined)
    this.leases = this.policies.some((p) => p.algorithm === 'concurrency')
    this.policyNames = this.policies.map((p) => p.name)
    this.policyAlgorithms = this.policies.map((p) => p.algorithm)
    if (shadow) this.shadowNames = new Set(this.policyNames)
    this.shadowAll = this.shadowNames?.size === this.policies.length
    this.policyByName = new Map(this.policies.map((p) => [p.name, p]))
    this.penalised = this.policies.some((p) => p.penalty !== undefined)
    this.overrides = new LimitOverrides(this.policies, this.policyByName)
    const { failures = 3, cooldownMs = 1000 } = breaker
    const { maxKeys = 10_000, maxBytes: localBytes = 4 * MIB } = localCapacity
    this.localCapacity = { maxKeys, maxBytes: localBytes }
    this.localShare = localShare
    if (denyCache !== false) {
      const { maxEntries = 10_000, maxBytes = 4 * MIB, maxMs = 1000 } = denyCache
      this.denyCache = new DenyCache(maxEntries, maxBytes, maxMs)
    }
    this.onStoreError = onStoreError
    this.onEvent = onEvent
    this.deadlines = new Deadlines(timeoutMs)
    store.useDeadline?.(timeoutMs)
    this.breakerSettings = { failures, cooldownMs }
    this.breaker = new CircuitBreaker(failures, cooldownMs, (state) =>
      emit(this.onEvent, { type: 'breaker', limiter: this.name, prefix: this.prefix, state }),
    )
    // The local fallback's policies: the same algorithms with a strict share of each quota.
    this.localPolicies = new Map(
      this.policies.map((p) => [
        p.name,
        {
          ...p,
          limit: Math.max(1, Math.floor(p.limit * localShare)),
          burst: Math.max(1, Math.floor(p.burst * localShare)),
        },
      ]),
    )
  }

  /**
   * Spends `cost` units (default 1) on every policy, or on none if any refuses.
   * A refusal is a decision with `allowed: false`, not an exception.
   *
   * @example
   * await login.consume({ ip: `ip:${ip}`, account: `email:${email}` }, { cost: 1 })
   */
  async consume(key: KeyInput, options?: CallOptions): Promise<Decision> {
    checkCall(options, CALL_OPTIONS)
    const cost = this.costOf(options)
    const entries = this.entriesWith(key, options)
    const cache = this.denyCache
    const signature = cache ? signatureOf(entries) : ''
    const started = monotonicMs()
    const allShadow = options?.shadow === true || this.shadowAll
    if (cache) {
      const hit = cache.get(signature, cost, started)
      // a refusal under other limits (per-call `limits`: a plan just upgraded) says nothing about this call
      if (hit && sameLimits(hit.decision, entries)) {
        if (this.onEvent || CHANNELS['cache-hit']?.hasSubscribers)
          emit(this.onEvent, { type: 'cache-hit', limiter: this.name, prefix: this.prefix })
        return this.answer('consume', cached(hit.decision, started - hit.at, entries), started, allShadow)
      }
    }
    let reply: StoreReply
    const policy = options?.onStoreError ?? this.onStoreError
    try {
      reply = await this.call(entries, () => this.store.consume(entries, cost), 'consume')
    } catch (error) {
      const fallback = await this.fallback(error, entries, cost, policy, true)
      return this.answer('consume', fallback, started, allShadow, policy)
    }
    const decision = this.decide(entries, cost, reply, true, 'store')
    if (
      !decision.allowed &&
      this.shadowNames !== undefined &&
      !allShadow &&
      this.onlyShadowRefused(decision)
    ) {
      // Mixed enforced and shadow policies, and only shadow ones refused: the atomic call spent nothing,
      // so charge the enforced ones alone, exactly as they would have been without the shadow policies.
      return this.answer(
        'consume',
        await this.chargeEnforced(entries, cost, decision, policy),
        started,
        false,
      )
    }
    // A refusal only shadow policies made is not cached: the next call must reach the store.
    // A refusal that a penalty still has to count is not cached either: only a block's is (penalty.ts).
    if (
      cache &&
      !decision.allowed &&
      !allShadow &&
      Number.isFinite(decision.retryAfterMs) &&
      (!this.penalised || onlyBlocksCount(decision, entries))
    ) {
      // A concurrency refusal lasts until a holder releases, which no retry time predicts: cached only
      // as long as a rate policy refuses too.
      const cacheMs = this.leases ? rateRetryMs(decision) : decision.retryAfterMs
      if (cacheMs > 0)
        cache.set(
          signature,
          cost,
          started,
          cacheMs,
          withoutIdentities(decision),
          DECISION_BYTES + POLICY_DECISION_BYTES * entries.length,
        )
    }
    return this.answer('consume', decision, started, allShadow)
  }

  /** The state without spending: `remaining` before any spend, `allowed` = would `cost` be admitted now. */
  async peek(key: KeyInput, options?: CallOptions): Promise<Decision> {
    checkCall(options, CALL_OPTIONS)
    const cost = this.costOf(options)
    const entries = this.entriesWith(key, options)
    const started = DECISION_CHANNEL?.hasSubscribers ? monotonicMs() : 0
    const allShadow = options?.shadow === true || this.shadowAll
    let reply: StoreReply
    try {
      reply = await this.call(entries, () => this.store.peek(entries, cost), 'peek')
    } catch (error) {
      const policy = options?.onStoreError ?? this.onStoreError
      const fallback = await this.fallback(error, entries, cost, policy, false)
      return this.answer('peek', fallback, started, allShadow, policy)
    }
    return this.answer('peek', this.decide(entries, cost, reply, false, 'store'), started, allShadow)
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
    if (!decision?.allowed || !token || decision.source !== 'store') return
    const { entries, tags } = this.spentEntries(decision, token, false)
    const charged = token.costs ?? token.cost
    let cost: PairCost = charged
    const asked = options?.cost
    if (asked !== undefined) {
      if (typeof options !== 'object' || options === null)
        throw new InputError('options', 'an object', options)
      cost = this.amountsOf(asked, entries, 'cost', 0)
      for (let i = 0; i < entries.length; i++) {
        const c = costAt(cost, i)
        if (c > costAt(charged, i)) {
          const name = typeof asked === 'number' ? 'cost' : `cost.${entries[i].policy.name}`
          throw new InputError(name, `at most the decision's cost (${costAt(charged, i)})`, c)
        }
      }
    }
    if (isFree(cost)) return
    const once = { id: spendNonce() + token.seq.toString(36), spent: charged }
    await this.call(entries, () => this.store.refund(entries, tags, cost, once), 'refund')
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
    if (typeof actualCost !== 'number') this.checkRecord(actualCost, 'actualCost')
    else if (!Number.isSafeInteger(actualCost) || actualCost < 0)
      throw new InputError('actualCost', 'a non-negative safe integer', actualCost)
    const token = decision?.refundToken
    if (!decision?.allowed || !token || decision.source !== 'store') return
    const { entries, tags, picked } = this.spentEntries(decision, token, true)
    if (entries.length === 0) return
    // signed, per pair: what goes back (> 0) or is charged more (< 0); sent even when 0, so the spend is
    // settled; a pair the record does not name is left as charged
    const record = typeof actualCost === 'number' ? undefined : actualCost
    const deltas = new Array<number>(entries.length)
    const spent = new Array<number>(entries.length)
    for (let i = 0; i < entries.length; i++) {
      spent[i] = token.costs ? token.costs[picked[i]] : token.cost
      const name = entries[i].policy.name
      if (record === undefined) deltas[i] = spent[i] - (actualCost as number)
      else deltas[i] = Object.hasOwn(record, name) && record[name] !== undefined ? spent[i] - record[name] : 0
    }
    const once = { id: spendNonce() + token.seq.toString(36), spent: collapse(spent), settle: true }
    const delta = collapse(deltas)
    await this.call(entries, () => this.store.refund(entries, tags, delta, once), 'settle')
  }

  /**
   * A call's cost: `value` (a number, or a record by policy name, each a non-negative safe integer) per
   * pair of `entries`, pairs the record does not name at `unnamed`. InputError naming `argument`.
   */
  private amountsOf(
    value: unknown,
    entries: readonly StoreEntry[],
    argument: string,
    unnamed: number,
  ): PairCost {
    if (typeof value === 'number') {
      if (!Number.isSafeInteger(value) || value < 0)
        throw new InputError(argument, 'a non-negative safe integer', value)
      return value
    }
    const record = this.checkRecord(value, argument)
    const costs = new Array<number>(entries.length)
    for (let i = 0; i < entries.length; i++) {
      const name = entries[i].policy.name
      costs[i] = Object.hasOwn(record, name) && record[name] !== undefined ? record[name] : unnamed
    }
    return collapse(costs)
  }

  /** A record of policy name to cost, each checked (InputError naming `argument.<name>`). */
  private checkRecord(value: unknown, argument: string): Readonly<Record<string, number>> {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new InputError(argument, 'a non-negative safe integer or a record of policy name to one', value)
    }
    const record = value as Readonly<Record<string, unknown>>
    for (const name of Object.keys(record)) {
      if (!this.policyByName.has(name)) {
        throw new InputError(`${argument}.${name}`, 'a policy name of this limiter', name)
      }
      const v = record[name]
      if (v === undefined) continue
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
        throw new InputError(`${argument}.${name}`, 'a non-negative safe integer', v)
      }
    }
    return record as Readonly<Record<string, number>>
  }

  /** A call's `cost` option: one number for every pair, or one per pair (policies not named cost 1). */
  private costOf(options: CallOptions | undefined): PairCost {
    if (options === undefined) return 1
    if (typeof options !== 'object' || options === null) throw new InputError('options', 'an object', options)
    const cost = options.cost
    if (cost === undefined) return 1
    if (typeof cost === 'number') {
      if (!Number.isSafeInteger(cost) || cost < 0)
        throw new InputError('cost', 'a non-negative safe integer', cost)
      return cost
    }
    const record = this.checkRecord(cost, 'cost')
    const policies = this.policies
    const costs = new Array<number>(policies.length)
    for (let i = 0; i < policies.length; i++) {
      const name = policies[i].name
      costs[i] = Object.hasOwn(record, name) && record[name] !== undefined ? record[name] : 1
    }
    return collapse(costs)
  }

  /** The (policy, key) pairs a decision spent on and their tags; `rates`: without concurrency policies. */
  private spentEntries(
    decision: Decision,
    token: RefundToken,
    rates: boolean,
  ): { entries: StoreEntry[]; tags: readonly number[]; picked: number[] } {
    const names = token.policies
    const entries: StoreEntry[] = []
    const tags: number[] = []
    const picked: number[] = []
    for (let i = 0; i < token.keys.length; i++) {
      const name = names ? names[i] : decision.policies[i]?.policy
      const policy = name === undefined ? undefined : this.policyByName.get(name)
      if (!policy) throw new InputError('decision', 'a decision made by this limiter', name)
      if (rates && policy.algorithm === 'concurrency') continue
      // a spend under a per-call limit is given back (or settled) under that limit
      entries.push({ policy: this.overrides.spentUnder(policy, token.limits?.[i]), key: token.keys[i] })
      tags.push(token.tags[i])
      picked.push(i)
    }
    return { entries, tags, picked }
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
    const byName = local ? this.localPolicies : this.policyByName
    const names = token.policies
    const entries: StoreEntry[] = []
    const tags: number[] = []
    const held: number[] = []
    for (let i = 0; i < token.keys.length; i++) {
      const name = names ? names[i] : decision.policies[i]?.policy
      const policy = name === undefined ? undefined : byName.get(name)
      if (!policy) throw new InputError('decision', 'a decision made by this limiter', name)
      if (policy.algorithm !== 'concurrency') continue
      entries.push({ policy, key: token.keys[i] })
      tags.push(token.tags[i])
      held.push(token.costs ? token.costs[i] : token.cost)
    }
    if (entries.length === 0) return
    released.add(token)
    // each lease gives back the slots it took (its policy's cost)
    const cost = collapse(held)
    if (local) {
      await this.localStore?.refund(entries, tags, cost)
      return
    }
    try {
      await this.call(entries, () => this.store.refund(entries, tags, cost), 'release')
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
  async attempt<T>(
    key: KeyInput,
    fn: (attempt: Attempt) => T | Promise<T>,
    options?: CallOptions,
  ): Promise<T> {
    // Checked before the spend: a callback that cannot run must not cost a unit.
    if (typeof fn !== 'function') throw new InputError('fn', 'a function of the attempt', fn)
    const decision = await this.consume(key, options)
    if (!decision.allowed) throw new RateLimitedError(decision)
    let pending: Promise<void> | undefined
    const handle: Attempt = {
      decision,
      refund: () => {
        pending ??= this.refund(decision)
        return pending
      },
    }
    if (!this.leases) {
      const result = await fn(handle)
      if (pending) await pending
      return result
    }
    try {
      const result = await fn(handle)
      if (pending) await pending
      return result
    } finally {
      await this.release(decision).catch(ignoreStoreError)
    }
  }

  /**
   * Consumes, sleeping `retryAfterMs` between refusals until admitted. Throws `RateLimitTimeoutError`
   * (without sleeping) when the next wait would pass `maxWaitMs` or can never succeed.
   */
  async wait(key: KeyInput, options: WaitOptions = {}): Promise<Decision> {
    checkCall(options, WAIT_OPTIONS)
    const { maxWaitMs = 60_000, signal, jitter = 0, pollMs = 100, ...call } = options
    if (typeof maxWaitMs !== 'number' || Number.isNaN(maxWaitMs) || maxWaitMs < 0) {
      throw new InputError('maxWaitMs', 'a non-negative number', maxWaitMs)
    }
    if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) {
      throw new InputError('jitter', 'a number from 0 to 1', jitter)
    }
    if (typeof pollMs !== 'number' || !Number.isFinite(pollMs) || pollMs <= 0) {
      throw new InputError('pollMs', 'a positive number of milliseconds', pollMs)
    }
    if (
      signal !== undefined &&
      (typeof signal !== 'object' ||
        signal === null ||
        typeof signal.throwIfAborted !== 'function' ||
        typeof signal.addEventListener !== 'function')
    ) {
      throw new InputError('signal', 'an AbortSignal', signal)
    }
    let waited = 0
    let attempts = 0
    let outcome: WaitMessage['outcome'] = 'error'
    try {
      for (;;) {
        signal?.throwIfAborted()
        attempts++
        const decision = await this.consume(key, call)
        if (decision.allowed) {
          outcome = 'admitted'
          return decision
        }
        let retry = decision.retryAfterMs
        // Only concurrency refused: a slot frees when a holder releases, so poll (until maxWaitMs).
        if (this.leases && Number.isFinite(retry) && rateRetryMs(decision) === 0) {
          retry = Math.min(retry, pollMs, maxWaitMs - waited)
          if (retry <= 0) retry = Number.POSITIVE_INFINITY
        }
        if (!Number.isFinite(retry) || waited + retry > maxWaitMs) {
          outcome = 'timeout'
          throw new RateLimitTimeoutError(decision, maxWaitMs)
        }
        const ms =
          jitter > 0
            ? Math.min(maxWaitMs - waited, retry + Math.floor(Math.random() * jitter * retry))
            : retry
        await sleep(ms, signal)
        waited += ms
      }
    } catch (error) {
      if (outcome === 'error' && signal?.aborted) outcome = 'aborted'
      throw error
    } finally {
      if (WAIT_CHANNEL?.hasSubscribers) {
        const message: WaitMessage = {
          limiter: this.name,
          prefix: this.prefix,
          outcome,
          waitedMs: waited,
          attempts,
        }
        WAIT_CHANNEL.publish(message)
      }
    }
  }

  /** Forgets the state of every policy for this key. */
  async reset(key: KeyInput): Promise<void> {
    // biome-ignore lint/complexity/noArguments: a JavaScript caller's options, refused rather than ignored
    if (arguments.length > 1) noOptions(arguments[1], 'reset')
    const entries = this.keys.entries(key)
    this.denyCache?.delete(signatureOf(entries))
    await this.call(entries, () => this.store.reset(entries), 'reset')
  }

  /** The Redis keys a call would touch (for debugging and the script contract docs). */
  keysFor(key: KeyInput): string[] {
    // biome-ignore lint/complexity/noArguments: a JavaScript caller's options, refused rather than ignored
    if (arguments.length > 1) noOptions(arguments[1], 'keysFor')
    return this.keys.entries(key).map((e) => e.key)
  }

  /** The call's entries, with its per-call `limits` if any. */
  private entriesWith(key: KeyInput, options: CallOptions | undefined): StoreEntry[] {
    const entries = this.keys.entries(key)
    const limits = options?.limits
    return limits === undefined ? entries : this.overrides.apply(entries, limits)
  }

  /**
   * One store call under the deadline and the breaker. Throws a StoreError (or StoreTimeoutError) on
   * failure, and when the breaker is open without calling the store at all.
   */
  private call<T>(
    entries: readonly StoreEntry[],
    run: () => Promise<T>,
    operation: StoreCallContext['operation'],
  ): Promise<T> {
    const breaker = this.breakerFor(entries)
    if (breaker.state !== 'closed' && !breaker.allow(this.store.readySince?.())) {
      return Promise.reject(new StoreError('circuit open: the store failed recently'))
    }
    let promise: Promise<T>
    try {
      promise = storeTraced()
        ? traceStore(
            { limiter: this.name, prefix: this.prefix, operation, pairs: entries.length, batchSize: 1 },
            run,
          )
        : run()
    } catch (error) {
      promise = Promise.reject(error)
    }
    return this.deadlines.guard(promise, this.callWatch, { breaker, entries })
  }

  /** A store call's outcome, for its breaker and the events (see `call`). Built once per limiter. */
  private readonly callWatch: CallWatch<{ breaker: CircuitBreaker; entries: readonly StoreEntry[] }> = {
    answered: ({ breaker }) => breaker.success(),
    failed: (error, { breaker, entries }) => {
      // Bad input a store refused is the caller's mistake, not an outage: it must reach the caller as
      // it is, never the failure policy (which could admit it).
      if (error instanceof InputError) return error
      if (error instanceof StoreTimeoutError) {
        breaker.failure()
        this.store.onTimeout?.(entries)
        emit(this.onEvent, {
          type: 'timeout',
          limiter: this.name,
          prefix: this.prefix,
          timeoutMs: error.timeoutMs,
        })
        return error
      }
      const fault = storeFaultOf(error)
      // A data error is an answer: the store is reachable, so it closes the breaker like a success
      // rather than opening it for every identity.
      if (fault === 'data') breaker.success()
      else breaker.failure()
      emit(this.onEvent, { type: 'store-error', limiter: this.name, prefix: this.prefix, error, fault })
      return error instanceof StoreError
        ? error
        : new StoreError(String((error as Error)?.message ?? error), { cause: error })
    },
  }

  /**
   * The breaker for a call: the store's scope for it (a cluster primary), or the limiter's own. At most
   * 1,024 scopes and 512 KiB are kept, the oldest going first (a cluster has far fewer primaries;
   * addresses change only on failover).
   */
  breakerFor(entries: readonly StoreEntry[]): CircuitBreaker {
    const scope = this.store.scopeOf?.(entries)
    if (scope === undefined) return this.breaker
    let breaker = this.scopedBreakers.get(scope)
    if (!breaker) {
      const bytes = SCOPE_BYTES + 2 * scope.length
      if (bytes > MAX_SCOPE_BYTES) return this.breaker
      for (const old of this.scopedBreakers.keys()) {
        if (this.scopedBreakers.size < MAX_SCOPES && this.scopeBytes + bytes <= MAX_SCOPE_BYTES) break
        this.scopedBreakers.delete(old)
        this.scopeBytes -= SCOPE_BYTES + 2 * old.length
      }
      const { failures, cooldownMs } = this.breakerSettings
      breaker = new CircuitBreaker(failures, cooldownMs, (state) =>
        emit(this.onEvent, { type: 'breaker', limiter: this.name, prefix: this.prefix, state, scope }),
      )
      this.scopedBreakers.set(scope, breaker)
      this.scopeBytes += bytes
    }
    return breaker
  }

  /** The decision of the failure policy, when the store failed or the circuit is open. */
  private async fallback(
    error: unknown,
    entries: StoreEntry[],
    cost: PairCost,
    policy: StoreErrorPolicy,
    spend: boolean,
  ): Promise<Decision> {
    if (!(error instanceof StoreError || error instanceof StoreTimeoutError)) throw error
    // An error about this key's data is not an outage, and is never admitted uncounted: under 'allow'
    // the local fallback counts it ('deny' still refuses).
    if (policy === 'allow' && storeFaultOf(error) === 'data') policy = 'local'
    let decision: Decision
    if (policy === 'local') {
      this.localStore ??= new MemoryStore(this.localCapacity)
      const local = entries.map((e) => ({ ...e, policy: this.localPolicy(e.policy) }))
      const reply = spend
        ? await this.localStore.consume(local, cost)
        : await this.localStore.peek(local, cost)
      // A spend token only when leases were taken: release() ends them in the local store.
      decision = this.decide(local, cost, reply, spend && this.leases, 'fallback')
    } else {
      const allowed = policy === 'allow'
      decision = {
        allowed,
        limit: 0,
        remaining: 0,
        resetMs: 0,
        retryAfterMs: allowed ? 0 : this.breakerFor(entries).retryInMs(),
        cost: maxCost(cost),
        policies: [],
        binding: -1,
        source: 'fallback',
      }
    }
    emit(this.onEvent, {
      type: 'fallback',
      limiter: this.name,
      prefix: this.prefix,
      policy,
      allowed: decision.allowed,
    })
    return decision
  }

  /** The local fallback's share of a policy (of a per-call limit too). */
  private localPolicy(p: ResolvedPolicy): ResolvedPolicy {
    if (this.policyByName.get(p.name) === p) return this.localPolicies.get(p.name)!
    const share = this.localShare
    return {
      ...p,
      limit: Math.max(1, Math.floor(p.limit * share)),
      burst: Math.max(1, Math.floor(p.burst * share)),
    }
  }

  /** Whether every policy that refused is in shadow (some policies are). */
  private onlyShadowRefused(decision: Decision): boolean {
    const names = this.shadowNames!
    for (const p of decision.policies) if (!p.allowed && !names.has(p.policy)) return false
    return true
  }

  /**
   * The second call of a limiter mixing enforced and shadow policies, made only when shadow policies
   * alone refused the first (which spent nothing): the enforced policies spend as if the shadow ones did
   * not exist, and the shadow ones stay unspent, as they would be if enforced.
   */
  private async chargeEnforced(
    entries: StoreEntry[],
    allCost: PairCost,
    first: Decision,
    policy: StoreErrorPolicy,
  ): Promise<Decision> {
    const names = this.shadowNames!
    const enforced: StoreEntry[] = []
    const picked: number[] = []
    for (let i = 0; i < entries.length; i++) {
      if (names.has(entries[i].policy.name)) continue
      enforced.push(entries[i])
      picked.push(i)
    }
    const cost = pickCost(allCost, picked)
    let second: Decision
    try {
      const reply = await this.call(enforced, () => this.store.consume(enforced, cost), 'consume')
      second = this.decide(enforced, cost, reply, true, 'store')
    } catch (error) {
      second = await this.fallback(error, enforced, cost, policy, true)
      if (second.policies.length === 0) return second
    }
    let j = 0
    const policies = entries.map((e, i) =>
      names.has(e.policy.name) ? first.policies[i] : second.policies[j++],
    )
    const token = second.refundToken
    return {
      ...second,
      policies,
      // The binding pair is among the enforced ones: its index in the whole call.
      binding: entries.indexOf(enforced[second.binding]),
      refundToken: token && { ...token, policies: enforced.map((e) => e.policy.name) },
    }
  }

  /**
   * Every consume / peek answer goes out through here: shadow policies' refusals become `allowed` with
   * `decision.shadow`, and the decision is published on `tollgate:decision` if anyone listens.
   */
  private answer(
    operation: 'consume' | 'peek',
    decision: Decision,
    started: number,
    allShadow: boolean,
    failurePolicy?: StoreErrorPolicy,
  ): Decision {
    const answer = allShadow || this.shadowNames !== undefined ? this.shadowed(decision, allShadow) : decision
    const channel = DECISION_CHANNEL
    if (channel?.hasSubscribers) {
      const message: DecisionMessage = {
        limiter: this.name,
        prefix: this.prefix,
        operation,
        decision: answer,
        policies: this.policyNames,
        algorithms: this.policyAlgorithms,
        failurePolicy: answer.source === 'fallback' ? failurePolicy : undefined,
        durationMs: started === 0 ? 0 : monotonicMs() - started,
      }
      channel.publish(message)
    }
    return answer
  }

  /** A decision with its shadow policies' refusals marked, and turned into a pass if only they refused. */
  private shadowed(decision: Decision, allShadow: boolean): Decision {
    let shadow: string[] | undefined
    let enforcedRefused = false
    if (decision.policies.length === 0) {
      // A failure-policy answer ('allow' / 'deny') has no pairs: it refuses for every policy.
      if (decision.allowed || !allShadow) return decision
      return { ...decision, allowed: true, retryAfterMs: 0, shadow: this.policyNames }
    }
    for (const p of decision.policies) {
      if (p.allowed) continue
      if (!allShadow && !this.shadowNames!.has(p.policy)) enforcedRefused = true
      else if (shadow === undefined) shadow = [p.policy]
      else shadow.push(p.policy)
    }
    if (shadow === undefined) return decision
    if (enforcedRefused || decision.allowed) return { ...decision, shadow }
    return { ...decision, allowed: true, retryAfterMs: 0, shadow }
  }

  /** The limits of a call made with per-call `limits` (for its refund), else undefined. */
  private limitsOf(entries: readonly StoreEntry[]): number[] | undefined {
    if (!this.overrides.used) return undefined
    for (const e of entries) {
      if (this.policyByName.get(e.policy.name) !== e.policy) return entries.map((x) => x.policy.limit)
    }
    return undefined
  }

  private decide(
    entries: StoreEntry[],
    cost: PairCost,
    reply: StoreReply,
    spent: boolean,
    source: Decision['source'],
  ): Decision {
    const { results } = reply
    let allowed = true
    let binding = 0
    const policies: PolicyDecision[] = new Array(entries.length)
    for (let i = 0; i < entries.length; i++) {
      const r = results[i]
      const p = entries[i].policy
      const retryAfterMs = r.retryAfterMs < 0 ? Number.POSITIVE_INFINITY : r.retryAfterMs
      policies[i] = {
        policy: p.name,
        key: entries[i].identity ?? entries[i].key,
        algorithm: p.algorithm,
        allowed: r.allowed,
        limit: p.burst,
        windowMs: p.windowMs,
        remaining: r.remaining,
        resetMs: r.resetMs,
        retryAfterMs,
      }
      if (r.tag === BLOCKED_TAG && !r.allowed) policies[i] = { ...policies[i], blocked: true }
      if (!r.allowed) allowed = false
    }
    // Binding policy: the refusing one with the longest wait, an enforced one before any in shadow (a shadow
    // policy never changes what a refused client is told, nor what the deny cache holds); if all allow,
    // the one with fewest units left.
    const shadow = this.shadowNames
    for (let i = 1; i < policies.length; i++) {
      const a = policies[i]
      const b = policies[binding]
      if (allowed) {
        if (a.remaining < b.remaining || (a.remaining === b.remaining && a.resetMs > b.resetMs)) binding = i
      } else if (!a.allowed) {
        if (b.allowed) binding = i
        else if (shadow !== undefined && shadow.has(a.policy) !== shadow.has(b.policy)) {
          if (shadow.has(b.policy)) binding = i
        } else if (a.retryAfterMs > b.retryAfterMs) binding = i
      }
    }
    const bp = policies[binding]
    return {
      allowed,
      limit: bp.limit,
      remaining: bp.remaining,
      resetMs: bp.resetMs,
      retryAfterMs: allowed ? 0 : bp.retryAfterMs,
      cost: typeof cost === 'number' ? cost : maxCost(cost),
      policies,
      binding,
      source,
      refundToken:
        spent && allowed && !isFree(cost)
          ? {
              keys: entries.map((e) => e.key),
              tags: results.map((r) => r.tag),
              cost: typeof cost === 'number' ? cost : maxCost(cost),
              costs: typeof cost === 'number' ? undefined : cost,
              seq: ++spendSeq,
              limits: this.limitsOf(entries),
            }
          : undefined,
    }
  }
}

/**
 * Spend ids: this process's random nonce + a counter. Unique across processes and limiters without a
 * random draw per decision; refund() sends it so the store gives each spend back at most once.
 */
let nonce: string | undefined
/** Drawn on first use, inside a request: Workers forbid random values in a module's global scope. */
function spendNonce(): string {
  if (nonce === undefined) {
    const bytes = new Uint8Array(9)
    globalThis.crypto.getRandomValues(bytes)
    nonce = base64Url(bytes)
  }
  return nonce
}
let spendSeq = 0

/**
 * Whether a refusal may be cached although a policy has a penalty: every penalised pair that refused is
 * blocked (a cached refusal never reaches the store, so one the penalty should count must go there).
 */
function onlyBlocksCount(decision: Decision, entries: readonly StoreEntry[]): boolean {
  const policies = decision.policies
  for (let i = 0; i < policies.length; i++) {
    if (!policies[i].allowed && entries[i].policy.penalty && !policies[i].blocked) return false
  }
  return true
}

/** Whether a cached decision was made under the limits of this call's entries. */
function sameLimits(decision: Decision, entries: readonly StoreEntry[]): boolean {
  const policies = decision.policies
  for (let i = 0; i < policies.length; i++) if (policies[i].limit !== entries[i].policy.burst) return false
  return true
}

/** Spends whose leases were released in this process (a second release() costs no round trip). */
const released = new WeakSet<RefundToken>()

/**
 * The longest wait among the refusing rate policies (not concurrency ones) of a decision: 0 when only
 * concurrency policies refused (or none did). A failure-policy refusal (no pairs) keeps its own wait.
 */
function rateRetryMs(decision: Decision): number {
  const policies = decision.policies
  if (policies.length === 0) return decision.retryAfterMs
  let ms = 0
  for (let i = 0; i < policies.length; i++) {
    const p = policies[i]
    if (!p.allowed && p.algorithm !== 'concurrency' && p.retryAfterMs > ms) ms = p.retryAfterMs
  }
  return ms
}

/** A release that failed in the store leaves the lease to expire: only programming errors surface. */
function ignoreStoreError(error: unknown): void {
  if (!(error instanceof StoreError || error instanceof StoreTimeoutError)) throw error
}

/** The deny cache's key: the call's Redis keys (one string per call, no join for one policy). */
function signatureOf(entries: readonly StoreEntry[]): string {
  if (entries.length === 1) return entries[0].key
  let s = entries[0].key
  for (let i = 1; i < entries.length; i++) s += `\n${entries[i].key}`
  return s
}

/**
 * What the deny cache keeps of a refusal: not the identities, which can be long (the keys, in the cache's
 * signature, hash long identities); a hit gets them back from its own call.
 */
function withoutIdentities(decision: Decision): Decision {
  return { ...decision, policies: decision.policies.map((p) => ({ ...p, key: '' })) }
}

/** A cached refusal made `elapsedMs` ago, with its times counted down and the call's identities. */
function cached(decision: Decision, elapsedMs: number, entries: readonly StoreEntry[]): Decision {
  const elapsed = Math.max(0, elapsedMs)
  const policies = decision.policies.map((p, i) => {
    const key = entries[i].identity ?? entries[i].key
    return p.allowed
      ? { ...p, key }
      : {
          ...p,
          key,
          retryAfterMs: Math.max(1, Math.ceil(p.retryAfterMs - elapsed)),
          resetMs: Math.max(0, Math.ceil(p.resetMs - elapsed)),
        }
  })
  return {
    ...decision,
    policies,
    retryAfterMs: Math.max(1, Math.ceil(decision.retryAfterMs - elapsed)),
    resetMs: Math.max(0, Math.ceil(decision.resetMs - elapsed)),
    source: 'cache',
  }
}

/** The per-call option names ({@link CallOptions}), and those of `wait()` ({@link WaitOptions}). */
const CALL_OPTIONS: ReadonlySet<string> = new Set(['cost', 'onStoreError', 'shadow', 'limits'])
const WAIT_OPTIONS: ReadonlySet<string> = new Set([
  ...CALL_OPTIONS,
  'maxWaitMs',
  'signal',
  'pollMs',
  'jitter',
])
const NO_OPTIONS: ReadonlySet<string> = new Set()
/** Per-call names of the libraries users come from, and what Tollgate calls them. */
const CALL_OPTION_HINTS: Readonly<Record<string, string>> = {
  points: "'cost'", // rate-limiter-flexible: consume(key, points)
  rate: "'cost'", // @upstash/ratelimit: limit(id, { rate })
  weight: "'cost'",
  tokens: "'cost'",
}
const STORE_ERROR_EXPECTED = oneOf(STORE_ERROR_POLICIES)
const quote = (name: string) => `'${name}'`

/**
 * Checks a call's options as the constructor checks its own (an object, known names only, each value
 * of its type), with `InputError` before any store command; the cost (a number or a record by policy) is
 * checked where it is read, by the limiter. The common call costs no allocation: no options, or only
 * known names, read in place.
 */
function checkCall(options: CallOptions | undefined, known: ReadonlySet<string>): void {
  if (options === undefined) return
  if (typeof options !== 'object' || options === null) throw new InputError('options', 'an object', options)
  for (const name in options) if (!known.has(name)) rejectUnknownCall(options, known, '')
  const { onStoreError, shadow } = options
  if (
    onStoreError !== undefined &&
    onStoreError !== 'allow' &&
    onStoreError !== 'deny' &&
    onStoreError !== 'local'
  ) {
    throw new InputError('onStoreError', STORE_ERROR_EXPECTED, onStoreError)
  }
  if (shadow !== undefined && typeof shadow !== 'boolean')
    throw new InputError('shadow', 'true or false', shadow)
}

/** Throws for the first name of `options` that `known` lacks, with the name it likely meant. */
function rejectUnknownCall(options: object, known: ReadonlySet<string>, method: string): void {
  for (const name in options) {
    if (known.has(name)) continue
    const expected = knownOption(name, known, CALL_OPTION_HINTS, quote, `${method}() takes no options`)
    throw new InputError(name, expected, (options as Record<string, unknown>)[name])
  }
}

/** The options a JavaScript caller gave a method that takes none: an error unless empty. */
function noOptions(options: unknown, method: string): void {
  if (options === undefined) return
  if (typeof options !== 'object' || options === null) {
    throw new InputError('options', `omitted (${method}() takes no options)`, options)
  }
  rejectUnknownCall(options, NO_OPTIONS, method)
}

/**
 * Sleeps at least `ms` by the monotonic clock. `setTimeout` counts from the event loop's cached time,
 * which lags after synchronous work, so on its own it can wake a few ms early: too early to be admitted.
 */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  const until = monotonicMs() + ms
  return new Promise((resolve, reject) => {
    let timer = setTimeout(done, ms)
    function done() {
      const left = until - monotonicMs()
      if (left > 0) {
        timer = setTimeout(done, Math.ceil(left))
        return
      }
      signal?.removeEventListener('abort', abort)
      resolve()
    }
    function abort() {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', abort, { once: true })
  })
}
