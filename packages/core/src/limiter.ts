/**
 * `RateLimiter`: one or several named policies, checked and charged together in one atomic store call.
 * @module
 */
import { rejectUnknown, resolvePolicy } from './algorithms'
import {
  ConfigError,
  InputError,
  RateLimitedError,
  RateLimitTimeoutError,
  StoreError,
  StoreTimeoutError,
} from './errors'
import { CHANNELS, emit, type TollgateEvent } from './events'
import { type BreakerOptions, CircuitBreaker, Deadlines, DenyCache, monotonicMs } from './failure'
import { buildKey, checkIdentity, identityTag, validatePrefix } from './keys'
import { MemoryStore } from './stores/memory-store'
import type {
  Algorithm,
  CallOptions,
  Decision,
  Duration,
  KeyInput,
  PolicyDecision,
  PolicyOptions,
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
  /** Several policies, applied together. The names appear in keys and in the RateLimit headers. */
  policies?: Record<string, PolicyOptions>
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
  /** Circuit breaker. @default { failures: 3, cooldownMs: 1000 } */
  breaker?: BreakerOptions
  /**
   * Remember refusals in-process until their retry time, so hammering a closed gate costs no round trip.
   * `false` turns it off. @default { maxEntries: 10000 }
   */
  denyCache?: false | { maxEntries?: number }
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
}

/** What `attempt()` hands to its callback. */
export interface Attempt {
  readonly decision: Decision
  /** Gives the spend back (e.g. the login succeeded). Awaited before `attempt()` resolves. */
  refund(): Promise<void>
}

/** Every option name of {@link RateLimiterOptions} (adapters accept them inline). */
export const LIMITER_OPTION_KEYS = [
  'store',
  'prefix',
  'limit',
  'window',
  'algorithm',
  'burst',
  'policies',
  'timeoutMs',
  'onStoreError',
  'localShare',
  'breaker',
  'denyCache',
  'onEvent',
] as const satisfies readonly (keyof RateLimiterOptions)[]
const LIMITER_KEYS = new Set<string>(LIMITER_OPTION_KEYS)
const STORE_ERROR_POLICIES: readonly unknown[] = ['allow', 'deny', 'local']
const SINGLE = 'default'

/**
 * A distributed rate limiter. Every call is one atomic round trip to the store.
 *
 * @example
 * const api = new RateLimiter({ store, limit: 100, window: '1m' })
 * const d = await api.consume('user:42')
 * if (!d.allowed) console.log(`retry in ${d.retryAfterMs} ms`)
 */
export class RateLimiter {
  readonly store: Store
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
  private readonly breakerSettings: { failures: number; cooldownMs: number }
  private readonly deadlines: Deadlines
  private readonly denyCache: DenyCache<Decision> | undefined
  private readonly onEvent: ((event: TollgateEvent) => void) | undefined
  private readonly localPolicies: ReadonlyMap<string, ResolvedPolicy>
  private localStore: MemoryStore | undefined

  constructor(options: RateLimiterOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ConfigError('options', 'an object', options, 'type')
    }
    rejectUnknown(options, LIMITER_KEYS, '')
    const {
      store,
      prefix = 'tollgate',
      policies,
      timeoutMs = 500,
      onStoreError = 'allow',
      localShare = 1,
      breaker = {},
      denyCache = {},
      onEvent,
      ...inline
    } = options
    if (!store || typeof store.consume !== 'function' || typeof store.refund !== 'function') {
      throw new ConfigError('store', 'a Store (new RedisStore(client) or new MemoryStore())', store, 'type')
    }
    this.store = store
    this.prefix = validatePrefix(prefix)
    const hasInline = Object.values(inline).some((v) => v !== undefined)
    if (policies !== undefined) {
      if (hasInline) {
        throw new ConfigError(
          'policies',
          'given alone (not with limit/window/algorithm/burst)',
          Object.keys(inline),
          'type',
        )
      }
      if (typeof policies !== 'object' || policies === null || Object.keys(policies).length === 0) {
        throw new ConfigError('policies', 'a non-empty object of named policies', policies, 'type')
      }
      this.policies = Object.entries(policies).map(([name, p]) => resolvePolicy(name, p, `policies.${name}.`))
    } else {
      this.policies = [resolvePolicy(SINGLE, inline, '')]
    }
    this.policyByName = new Map(this.policies.map((p) => [p.name, p]))
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new ConfigError('timeoutMs', 'a positive number of milliseconds', timeoutMs)
    }
    if (!STORE_ERROR_POLICIES.includes(onStoreError)) {
      throw new ConfigError('onStoreError', "'allow', 'deny' or 'local'", onStoreError)
    }
    if (typeof localShare !== 'number' || !(localShare > 0 && localShare <= 1)) {
      throw new ConfigError('localShare', 'a number in (0, 1]: 1 / the number of instances', localShare)
    }
    if (typeof breaker !== 'object' || breaker === null)
      throw new ConfigError('breaker', 'an object', breaker, 'type')
    rejectUnknown(breaker, new Set(['failures', 'cooldownMs']), 'breaker.')
    const { failures = 3, cooldownMs = 1000 } = breaker
    if (!Number.isSafeInteger(failures) || failures < 1)
      throw new ConfigError('breaker.failures', 'a positive integer', failures)
    if (typeof cooldownMs !== 'number' || !Number.isFinite(cooldownMs) || cooldownMs <= 0) {
      throw new ConfigError('breaker.cooldownMs', 'a positive number of milliseconds', cooldownMs)
    }
    if (onEvent !== undefined && typeof onEvent !== 'function')
      throw new ConfigError('onEvent', 'a function', onEvent, 'type')
    if (denyCache !== false) {
      if (typeof denyCache !== 'object' || denyCache === null) {
        throw new ConfigError('denyCache', 'false or { maxEntries }', denyCache, 'type')
      }
      rejectUnknown(denyCache, new Set(['maxEntries']), 'denyCache.')
      const { maxEntries = 10_000 } = denyCache
      if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
        throw new ConfigError('denyCache.maxEntries', 'a positive integer', maxEntries)
      }
      this.denyCache = new DenyCache(maxEntries)
    }
    this.onStoreError = onStoreError
    this.onEvent = onEvent
    this.deadlines = new Deadlines(timeoutMs)
    store.useDeadline?.(timeoutMs)
    this.breakerSettings = { failures, cooldownMs }
    this.breaker = new CircuitBreaker(failures, cooldownMs, (state) =>
      emit(this.onEvent, { type: 'breaker', prefix: this.prefix, state }),
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
    const cost = costOf(options)
    const entries = this.entries(key)
    const cache = this.denyCache
    const signature = cache ? signatureOf(entries) : ''
    const started = monotonicMs()
    if (cache) {
      const hit = cache.get(signature, cost, started)
      if (hit) {
        if (this.onEvent || CHANNELS['cache-hit']?.hasSubscribers)
          emit(this.onEvent, { type: 'cache-hit', prefix: this.prefix })
        return cached(hit.decision, Math.ceil(hit.until - started))
      }
    }
    let reply: StoreReply
    try {
      reply = await this.call(entries, () => this.store.consume(entries, cost))
    } catch (error) {
      return this.fallback(error, entries, cost, options?.onStoreError ?? this.onStoreError, true)
    }
    const decision = this.decide(entries, cost, reply, true, 'store')
    if (cache && !decision.allowed && Number.isFinite(decision.retryAfterMs)) {
      cache.set(signature, cost, started + decision.retryAfterMs, decision)
    }
    return decision
  }

  /** The state without spending: `remaining` before any spend, `allowed` = would `cost` be admitted now. */
  async peek(key: KeyInput, options?: CallOptions): Promise<Decision> {
    const cost = costOf(options)
    const entries = this.entries(key)
    let reply: StoreReply
    try {
      reply = await this.call(entries, () => this.store.peek(entries, cost))
    } catch (error) {
      return this.fallback(error, entries, cost, options?.onStoreError ?? this.onStoreError, false)
    }
    return this.decide(entries, cost, reply, false, 'store')
  }

  /**
   * Gives an admitted decision's spend back (all of it, or `cost` of it). Never below zero usage, never
   * into a newer window than the one the spend was made in. A refused decision spent nothing: no-op.
   */
  async refund(decision: Decision, options?: CallOptions): Promise<void> {
    const token = decision?.refundToken
    if (!decision?.allowed || !token || decision.source !== 'store') return
    const cost = options?.cost === undefined ? token.cost : costOf(options)
    if (cost > token.cost) throw new InputError('cost', `at most the decision's cost (${token.cost})`, cost)
    if (cost === 0) return
    const entries: StoreEntry[] = decision.policies.map((pd, i) => {
      const policy = this.policyByName.get(pd.policy)
      if (!policy) throw new InputError('decision', 'a decision made by this limiter', pd.policy)
      return { policy, key: token.keys[i] }
    })
    await this.call(entries, () => this.store.refund(entries, token.tags, cost))
  }

  /**
   * Spends first, then runs `fn`; `fn` may refund (e.g. only failed logins count). Throws
   * `RateLimitedError` without running `fn` when refused.
   *
   * @example
   * await login.attempt({ ip, account }, async (a) => { if (await checkPassword()) await a.refund() })
   */
  async attempt<T>(
    key: KeyInput,
    fn: (attempt: Attempt) => T | Promise<T>,
    options?: CallOptions,
  ): Promise<T> {
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
    const result = await fn(handle)
    if (pending) await pending
    return result
  }

  /**
   * Consumes, sleeping `retryAfterMs` between refusals until admitted. Throws `RateLimitTimeoutError`
   * (without sleeping) when the next wait would pass `maxWaitMs` or can never succeed.
   */
  async wait(key: KeyInput, options: WaitOptions = {}): Promise<Decision> {
    const { maxWaitMs = 60_000, signal, ...call } = options
    if (typeof maxWaitMs !== 'number' || Number.isNaN(maxWaitMs) || maxWaitMs < 0) {
      throw new InputError('maxWaitMs', 'a non-negative number', maxWaitMs)
    }
    let waited = 0
    for (;;) {
      signal?.throwIfAborted()
      const decision = await this.consume(key, call)
      if (decision.allowed) return decision
      if (!Number.isFinite(decision.retryAfterMs) || waited + decision.retryAfterMs > maxWaitMs) {
        throw new RateLimitTimeoutError(decision, maxWaitMs)
      }
      await sleep(decision.retryAfterMs, signal)
      waited += decision.retryAfterMs
    }
  }

  /** Forgets the state of every policy for this key. */
  async reset(key: KeyInput): Promise<void> {
    const entries = this.entries(key)
    this.denyCache?.delete(signatureOf(entries))
    await this.call(entries, () => this.store.reset(entries))
  }

  /** The Redis keys a call would touch (for debugging and the script contract docs). */
  keysFor(key: KeyInput): string[] {
    return this.entries(key).map((e) => e.key)
  }

  private entries(key: KeyInput): StoreEntry[] {
    const policies = this.policies
    if (typeof key === 'string') {
      const tag = identityTag(checkIdentity(key, 'key'))
      return policies.map((policy) => ({
        policy,
        key: `${this.prefix}:{${tag}}:${policy.name}`,
        identity: key,
      }))
    }
    if (typeof key !== 'object' || key === null)
      throw new InputError('key', 'a string or a record of policy name to key', key)
    const names = Object.keys(key)
    for (const name of names) {
      if (!this.policyByName.has(name)) {
        throw new InputError(
          `key.${name}`,
          `a policy name of this limiter (${policies.map((p) => p.name).join(', ')})`,
          name,
        )
      }
    }
    return policies.map((policy) => {
      if (!Object.hasOwn(key, policy.name)) {
        throw new InputError(`key.${policy.name}`, 'a non-empty string (every policy needs a key)', undefined)
      }
      const identity = checkIdentity(key[policy.name], `key.${policy.name}`)
      return { policy, key: buildKey(this.prefix, identity, policy.name), identity }
    })
  }

  /**
   * One store call under the deadline and the breaker. Throws a StoreError (or StoreTimeoutError) on
   * failure, and when the breaker is open without calling the store at all.
   */
  private async call<T>(entries: readonly StoreEntry[], run: () => Promise<T>): Promise<T> {
    const breaker = this.breakerFor(entries)
    if (breaker.state !== 'closed' && !breaker.allow(this.store.readySince?.())) {
      throw new StoreError('circuit open: the store failed recently')
    }
    try {
      const result = await this.deadlines.run(run())
      breaker.success()
      return result
    } catch (error) {
      breaker.failure()
      if (error instanceof StoreTimeoutError) {
        this.store.onTimeout?.(entries)
        emit(this.onEvent, { type: 'timeout', prefix: this.prefix, timeoutMs: error.timeoutMs })
        throw error
      }
      emit(this.onEvent, { type: 'store-error', prefix: this.prefix, error })
      throw error instanceof StoreError
        ? error
        : new StoreError(String((error as Error)?.message ?? error), { cause: error })
    }
  }

  /**
   * The breaker for a call: the store's scope for it (a cluster primary), or the limiter's own. At most
   * 1,024 scopes are kept (a cluster has far fewer primaries; addresses change only on failover).
   */
  breakerFor(entries: readonly StoreEntry[]): CircuitBreaker {
    const scope = this.store.scopeOf?.(entries)
    if (scope === undefined) return this.breaker
    let breaker = this.scopedBreakers.get(scope)
    if (!breaker) {
      if (this.scopedBreakers.size >= 1024)
        this.scopedBreakers.delete(this.scopedBreakers.keys().next().value!)
      const { failures, cooldownMs } = this.breakerSettings
      breaker = new CircuitBreaker(failures, cooldownMs, (state) =>
        emit(this.onEvent, { type: 'breaker', prefix: this.prefix, state, scope }),
      )
      this.scopedBreakers.set(scope, breaker)
    }
    return breaker
  }

  /** The decision of the failure policy, when the store failed or the circuit is open. */
  private async fallback(
    error: unknown,
    entries: StoreEntry[],
    cost: number,
    policy: StoreErrorPolicy,
    spend: boolean,
  ): Promise<Decision> {
    if (!(error instanceof StoreError || error instanceof StoreTimeoutError)) throw error
    let decision: Decision
    if (policy === 'local') {
      this.localStore ??= new MemoryStore({ maxKeys: 10_000 })
      const local = entries.map((e) => ({ ...e, policy: this.localPolicies.get(e.policy.name)! }))
      const reply = spend
        ? await this.localStore.consume(local, cost)
        : await this.localStore.peek(local, cost)
      decision = this.decide(local, cost, reply, false, 'fallback')
    } else {
      const allowed = policy === 'allow'
      decision = {
        allowed,
        limit: 0,
        remaining: 0,
        resetMs: 0,
        retryAfterMs: allowed ? 0 : this.breakerFor(entries).retryInMs(),
        cost,
        policies: [],
        source: 'fallback',
      }
    }
    emit(this.onEvent, { type: 'fallback', prefix: this.prefix, policy, allowed: decision.allowed })
    return decision
  }

  private decide(
    entries: StoreEntry[],
    cost: number,
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
      if (!r.allowed) allowed = false
    }
    // Binding policy: the refusing one with the longest wait; if all allow, the one with fewest units left.
    for (let i = 1; i < policies.length; i++) {
      const a = policies[i]
      const b = policies[binding]
      if (allowed) {
        if (a.remaining < b.remaining || (a.remaining === b.remaining && a.resetMs > b.resetMs)) binding = i
      } else if (!a.allowed && (b.allowed || a.retryAfterMs > b.retryAfterMs)) binding = i
    }
    const bp = policies[binding]
    return {
      allowed,
      limit: bp.limit,
      remaining: bp.remaining,
      resetMs: bp.resetMs,
      retryAfterMs: allowed ? 0 : bp.retryAfterMs,
      cost,
      policies,
      source,
      refundToken:
        spent && allowed && cost > 0
          ? { keys: entries.map((e) => e.key), tags: results.map((r) => r.tag), cost }
          : undefined,
    }
  }
}

/** The deny cache's key: the call's Redis keys (one string per call, no join for one policy). */
function signatureOf(entries: readonly StoreEntry[]): string {
  if (entries.length === 1) return entries[0].key
  let s = entries[0].key
  for (let i = 1; i < entries.length; i++) s += `\n${entries[i].key}`
  return s
}

/** A cached refusal, with its retry time counted down. */
function cached(decision: Decision, retryAfterMs: number): Decision {
  const elapsed = Math.max(0, decision.retryAfterMs - retryAfterMs)
  const policies = decision.policies.map((p) =>
    p.allowed
      ? p
      : {
          ...p,
          retryAfterMs: Math.max(1, p.retryAfterMs - elapsed),
          resetMs: Math.max(0, p.resetMs - elapsed),
        },
  )
  return {
    ...decision,
    policies,
    retryAfterMs: Math.max(1, retryAfterMs),
    resetMs: Math.max(0, decision.resetMs - elapsed),
    source: 'cache',
  }
}

function costOf(options: CallOptions | undefined): number {
  if (options === undefined) return 1
  if (typeof options !== 'object' || options === null) throw new InputError('options', 'an object', options)
  const cost = options.cost
  if (cost === undefined) return 1
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new InputError('cost', 'a non-negative safe integer', cost)
  }
  return cost
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
