/**
 * The option and result types of `@tollgate/core`, in one place (the express-rate-limit habit):
 * every option carries its default in TSDoc.
 * @module
 */
import type { CalendarWindow, ResolvedCalendar } from './calendar'

/**
 * The five rate algorithms, and `'concurrency'` (requests in flight: a `{ concurrency, lease }` policy).
 * See `docs/algorithms.md` for semantics and memory per key.
 */
export type Algorithm =
  | 'fixed-window'
  | 'sliding-window'
  | 'sliding-log'
  | 'token-bucket'
  | 'gcra'
  | 'concurrency'

/** A duration: milliseconds as a number, or `'500ms' | '10s' | '15m' | '1h' | '1d'`. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`

/** One named policy: a quota of `limit` units per `window`. */
export interface PolicyOptions {
  /** Units admitted per window (a positive safe integer). */
  limit: number
  /**
   * Window length, or a calendar window: `{ calendar: 'day' | 'week' | 'month' | 'year', timeZone }`, a
   * fixed window that follows the calendar in an IANA time zone (default 'UTC'; weeks start on Monday).
   */
  window: Duration | CalendarWindow
  /** @default 'sliding-window' */
  algorithm?: Algorithm
  /**
   * Bucket capacity for `token-bucket` and `gcra`: how many units may be spent at once from a full bucket.
   * The refill rate stays `limit` per `window`. Not accepted by the window algorithms.
   * @default limit
   */
  burst?: number
  /**
   * Decide and report this policy, but never refuse because of it ("would have refused" goes to
   * `decision.shadow` and the metrics). Its own state evolves as if it were enforced. See
   * docs/observability.md#shadow-mode.
   * @default false
   */
  shadow?: boolean
  /**
   * Block the identity for a while once this policy has refused it `after` times (a login lockout, a
   * scraper's timeout), each repeat offence longer. Decided in the same script as the refusal. See
   * docs/algorithms.md#penalties-and-lockouts.
   * @default none
   * @example
   * { limit: 5, window: '15m', penalty: { after: 3, block: '15m', factor: 2, max: '1d' } }
   */
  penalty?: PenaltyOptions
  /**
   * Hot keys at local speed: this process takes up to `reserve` units at a time from the store (a spend
   * like any other, so the limit holds across every process) and admits the key's next calls from them
   * without a round trip, until they run out or the window they were taken in ends; unused units lapse.
   * A positive integer no larger than `limit`, on a `fixed-window` or `sliding-window` policy, not in
   * shadow, without a penalty; with several policies, on every one (one refill takes each policy short
   * of units its own, atomically), none a concurrency limit. See docs/reserve.md.
   * @default none (every call goes to the store)
   * @example
   * { limit: 10_000, window: '1m', reserve: 100 }
   */
  reserve?: number
}

/**
 * A policy's penalty: after `after` refusals within `within`, the (policy, identity) pair is refused
 * outright for `block`; each block that follows another within `forget` of its end is `factor` times
 * longer, up to `max`. `reset()` lifts it; refunds do not.
 */
export interface PenaltyOptions {
  /** Refusals (by this policy) that start a block. @default 1 */
  after?: number
  /** The time the `after` refusals must fall within. @default the policy's window */
  within?: Duration
  /** Length of the first block. */
  block: Duration
  /** Each repeat block is this many times the last (a number from 1 to 100). @default 1 */
  factor?: number
  /** Longest block. @default block when factor is 1, else max(block, '1d') */
  max?: Duration
  /**
   * How long after a block ends a new block still counts as a repeat (and grows). @default max
   */
  forget?: Duration
}

/** A validated penalty (every duration in ms). */
export interface ResolvedPenalty {
  readonly after: number
  readonly withinMs: number
  readonly blockMs: number
  readonly factor: number
  readonly maxMs: number
  readonly forgetMs: number
}

/** A fully validated policy, as the stores see it. */
export interface ResolvedPolicy {
  readonly name: string
  readonly algorithm: Algorithm
  readonly limit: number
  readonly windowMs: number
  /** Capacity (equals `limit` for the window algorithms). */
  readonly burst: number
  /** The policy's penalty, if it has one. */
  readonly penalty?: ResolvedPenalty
  /** A calendar window's period and zone (then `windowMs` is the period's nominal length). */
  readonly calendar?: ResolvedCalendar
}

/** The state of one (policy, key) pair after a call. */
export interface PolicyDecision {
  /** Policy name (`'default'` for a single-policy limiter). */
  readonly policy: string
  /** The identity this policy was applied to, as the caller gave it. */
  readonly key: string
  readonly algorithm: Algorithm
  readonly allowed: boolean
  /** The policy's quota (`burst` for token-bucket and gcra). */
  readonly limit: number
  /** Window length in ms. */
  readonly windowMs: number
  /** Units left after this call (before it, for `peek`). Whole units, never negative. */
  readonly remaining: number
  /** Milliseconds until this pair is back to its full quota if nothing else is spent. */
  readonly resetMs: number
  /**
   * Milliseconds until a call of the same cost can succeed (0 when allowed). `Infinity` when the cost
   * exceeds what the policy can ever grant.
   */
  readonly retryAfterMs: number
  /**
   * Present (true) when the pair is refused because its policy's `penalty` blocks it: `retryAfterMs` is
   * the block's end.
   */
  readonly blocked?: true
}

/**
 * The answer to `consume` / `peek`. A denial is a result, never an exception.
 *
 * @example
 * // limit 5 per minute, fresh key, consume():
 * // { allowed: true, limit: 5, remaining: 4, resetMs: 60000, retryAfterMs: 0, policies: [ … ] }
 */
export interface Decision {
  readonly allowed: boolean
  /** Limit of the binding policy (see `binding`). */
  readonly limit: number
  readonly remaining: number
  readonly resetMs: number
  /** 0 when allowed; the longest wait among refusing policies otherwise (`Infinity` if never). */
  readonly retryAfterMs: number
  /** Units this call asked for (with a cost per policy, the largest of them). */
  readonly cost: number
  /** Every (policy, key) pair's own numbers, in policy declaration order. */
  readonly policies: readonly PolicyDecision[]
  /**
   * Index in `policies` of the binding pair, the one `limit` / `remaining` / `resetMs` come from: the
   * refusing pair with the longest wait, else the pair with the fewest units left (the later reset on a
   * tie). Chosen once, by the limiter; the draft-6/-7 headers read it. -1 when `policies` is empty (a
   * failure-policy answer).
   *
   * @example
   * // policies burst (9 left) and daily (812 left), allowed:
   * decision.policies[decision.binding].policy // 'burst'
   */
  readonly binding: number
  /**
   * Where the decision came from: the store; the deny cache; the failure policy; units this process
   * took from the store earlier or in this call (`reserve`, docs/reserve.md); or, in the store, a block
   * that refused it (`block`) or allow entries that admitted it without spending (`allow`, docs/blocks.md).
   */
  readonly source: 'store' | 'cache' | 'fallback' | 'reserve' | 'block' | 'allow'
  /**
   * Shadow mode: the policies that refused but are in shadow (limiter or policy `shadow`, or the call's
   * `shadow` option), so they did not refuse. Absent when no shadow policy refused. When only shadow
   * policies refused, `allowed` is true and `retryAfterMs` 0; `limit`/`remaining`/`resetMs` and
   * `policies` still show the refusing numbers.
   *
   * @example
   * // new RateLimiter({ store, limit: 1, window: '1m', shadow: true }), second consume():
   * // { allowed: true, remaining: 0, retryAfterMs: 0, shadow: ['default'], ... }
   */
  readonly shadow?: readonly string[]
  /** Opaque data `refund()` needs to stay inside the window the spend was made in. @internal */
  readonly refundToken?: RefundToken
}

/** @internal What a refund needs: one spend tag per pair, from the store. */
export interface RefundToken {
  /** Policy of each key, when it differs from `decision.policies` (a shadow policy that did not spend). */
  readonly policies?: readonly string[]
  readonly keys: readonly string[]
  readonly tags: readonly number[]
  readonly cost: number
  /** Each key's cost, when the call charged its policies different costs (`cost` is then the largest). */
  readonly costs?: readonly number[]
  /** The process that made the spend, a random nonce: with `seq`, the spend's id wherever the token is sent. */
  readonly nonce: string
  /** This spend's number in its process (refunds and settlements are once per id). */
  readonly seq: number
  /** Each pair's limit, when the call had per-call `limits` (the refund is made under them). */
  readonly limits?: readonly number[]
}

/**
 * @internal Names one spend so that the store gives it back at most once, whoever refunds it and however
 * often (a retry after a timeout included): the units given back under one `id` never exceed `spent`.
 */
export interface SpendOnce {
  readonly id: string
  /** The spend's cost: one for every entry, or one per entry. */
  readonly spent: PairCost
  /**
   * A settlement (`limiter.settle`): the signed cost applies only if nothing was refunded or settled
   * under `id` yet, and nothing more applies afterwards.
   */
  readonly settle?: boolean
}

/** A key argument: one identity for every policy, or one identity per policy name. */
export type KeyInput = string | Readonly<Record<string, string>>

/**
 * What a limiter does when the store fails (error, deadline passed, circuit open):
 * - `'allow'`: admit, with no quota numbers (adapters send no RateLimit headers: never fake quota);
 * - `'deny'`: refuse (adapters answer 503 with Retry-After, not 429);
 * - `'local'`: decide with an in-process limiter holding a strict share of the quota (`localShare`).
 */
export type StoreErrorPolicy = 'allow' | 'deny' | 'local'

/**
 * @internal A store call's cost: one for every entry, or one per entry (in entry order). Stores get an
 * array only when the costs differ and there are two entries or more.
 */
export type PairCost = number | readonly number[]

/** A call's cost: one number for every policy, or costs by policy name (policies not named cost 1). */
export type CallCost = number | Readonly<Record<string, number>>

/** Options of a single call. */
export interface CallOptions {
  /**
   * Units to spend (a non-negative safe integer) on every policy, or costs by policy name (policies not
   * named are charged 1). Validated per call (a bad value, or a name that is not a policy of this
   * limiter, is an `InputError`: refused before Redis). Every policy is checked with its own cost and
   * charged it, or none is, in one script.
   * @default 1
   * @example
   * // requests 60 per minute and tokens 10,000 per minute: charges requests 1 and tokens the estimate
   * await ai.consume(`key:${apiKey}`, { cost: { tokens: estimate } })
   */
  cost?: CallCost
  /** Overrides the limiter's failure policy for this call (e.g. fail closed on /login). */
  onStoreError?: StoreErrorPolicy
  /** Every policy in shadow for this call: decide and report, never refuse. @default false */
  shadow?: boolean
  /**
   * Per-call limits (a plan's, a tenant's): one number for a single-policy limiter, or limits by policy
   * name (policies not named keep theirs). Validated per call like the `limit` option (a bad value is an
   * `InputError`: refused before Redis, never admitted); `burst` follows when it was the default. Sent to
   * the script with the call: no limiter per value, no second round trip. State is per key, so a key
   * whose limit changes keeps what it spent.
   * @default the policies' own limits
   * @example
   * await api.consume(`tenant:${t.id}`, { limits: t.plan.perMinute })
   * await quota.consume(key, { limits: { burst: plan.burst, daily: plan.daily } })
   */
  limits?: number | Readonly<Record<string, number>>
}

/** One (policy, Redis key) pair handed to a store. */
export interface StoreEntry {
  readonly policy: ResolvedPolicy
  /** The full Redis key, built by `keys.ts`. */
  readonly key: string
  /** The identity as the caller gave it (reported in decisions; the RateLimit `pk` hashes it). */
  readonly identity?: string
  /**
   * @internal The key builder that made the entry, whose key follows from its identity and policy alone:
   * two entries of one builder with the same identity and policy have the same key.
   */
  readonly builder?: object
}

/** Raw per-pair numbers from a store (the reply of the scripts). */
export interface StoreResult {
  readonly allowed: boolean
  readonly remaining: number
  readonly resetMs: number
  /** -1 means never (cost above capacity). */
  readonly retryAfterMs: number
  /** Spend tag for refunds (window index, spend time, or TAT). */
  readonly tag: number
  /** The limit the identity's stored override set for this pair, when one did. */
  readonly limit?: number
}

/** A store's answer: the time the store decided at (its own clock, us) and one result per entry. */
export interface StoreReply {
  readonly nowUs: number
  readonly results: StoreResult[]
  /** Calls that went to Redis in the same script as this one (a batching store sets it; else 1). */
  readonly batchSize?: number
}

/**
 * Sorted sets of refusals, identity -> count, one per (limiter, policy, period): what `RateLimiter.top`
 * reads. Only refused calls are ever counted.
 */
export interface TopSets {
  /** Adds `counts` to the set under `key`, which keeps its `cap` most refused members and expires at `expiresAtMs` (epoch ms). */
  add(key: string, cap: number, expiresAtMs: number, counts: ReadonlyMap<string, number>): Promise<void>
  /** Per key, its [identity, refusals] pairs, most refused first (keys of one limiter and policy). */
  read(keys: readonly string[]): Promise<[string, number][][]>
}

/** One stored entry of {@link Controls.list}: a blocked identity's tag or identity, reason and time left. */
export interface ControlEntry {
  readonly identity: string
  readonly reason: string
  readonly expiresInMs: number
}

/**
 * Block and allow entries, one control key per identity (keys.ts), which the decision scripts read with
 * the identity's pairs; and the index `RateLimiter.blocks` lists. Times are the store's own clock.
 */
export interface Controls {
  /** Sets (`forMs` > 0) or clears (0) the entry `kind` of a control key; a block carries its `reason`. */
  set(key: string, kind: 'block' | 'allow', forMs: number, reason: string): Promise<void>
  /** Records (`forMs` > 0) or removes a block in the prefix's index under `indexKey`. */
  index(indexKey: string, identity: string, forMs: number, reason: string): Promise<void>
  /** The live blocks of an index, at most `max`, soonest first not guaranteed. */
  list(indexKey: string, max: number): Promise<ControlEntry[]>
  /** Sets an identity's overrides (`spec`, '' clears them), for `ttlMs` (0: no end). */
  setOverride(key: string, spec: string, ttlMs: number): Promise<void>
  /** An identity's live overrides: `spec` and the time left (-1: no end). */
  getOverride(key: string): Promise<{ spec: string; expiresInMs: number } | undefined>
  /** Records (`spec` not '') or removes an identity in the prefix's override index, at most `max` held. */
  indexOverride(indexKey: string, identity: string, spec: string, ttlMs: number, max: number): Promise<void>
  /** The live overrides of an index, at most `max`. */
  listOverrides(
    indexKey: string,
    max: number,
  ): Promise<{ identity: string; spec: string; expiresInMs: number }[]>
  /**
   * Sets (`spec` not '') or removes a pattern (its prefix, `tenant:acme:` of `tenant:acme:*`) of the
   * limiter `prefix`'s table, for `ttlMs` (0: no end), at most `max` held; resolves to the table's
   * new version once every process will apply it on its next call (after `publishPattern`, if any).
   */
  setPattern(prefix: string, pattern: string, spec: string, ttlMs: number, max: number): Promise<number>
  /**
   * After `setPattern`, with no deadline (a cluster writes one key per slot): makes the version seen
   * everywhere, and this process's copy current.
   */
  publishPattern?(prefix: string, version: number): Promise<void>
  /** The live patterns of the limiter `prefix`: pattern prefix, spec and time left (-1: no end). */
  listPatterns(prefix: string): Promise<{ pattern: string; spec: string; expiresInMs: number }[]>
}

/**
 * The storage seam. `RedisStore` and `MemoryStore` implement it; both give the same decisions.
 * Every method takes all pairs of one call and treats them atomically.
 */
export interface Store {
  /**
   * Check every entry; spend `cost` (one for all, or one per entry) on all of them only if all allow it.
   * `timeoutMs`: how long the caller waits for the answer; a store may then decline to act on a call
   * that reaches it too late to be of use (RedisStore does), answering it with an error.
   */
  consume(entries: readonly StoreEntry[], cost: PairCost, timeoutMs?: number): Promise<StoreReply>
  /** Check without spending. */
  peek(entries: readonly StoreEntry[], cost: PairCost): Promise<StoreReply>
  /**
   * Give `cost` back to each entry, bounded by the spend's window (see tags); a negative `cost` (a
   * settlement) charges `-cost` more, bounded the same way. With `once`, the units given back under its
   * id never sum past its `spent`; with `once.settle`, the call applies only to a spend nothing was
   * refunded or settled from yet. A cost per entry gives back (or charges) each its own, 0 leaving it
   * alone. Resolves to the store's time, us.
   */
  refund(
    entries: readonly StoreEntry[],
    tags: readonly number[],
    cost: PairCost,
    once?: SpendOnce,
  ): Promise<number>
  /** Forget the entries' state. */
  reset(entries: readonly StoreEntry[]): Promise<void>
  /** Where limiters keep the identities they refused most (`RateLimiter.top`). */
  readonly topSets?: TopSets
  /** Block and allow entries (`RateLimiter.block`, `allow`); a store without them refuses those calls. */
  readonly controls?: Controls
  /**
   * The failure scope of a call: calls in different scopes fail independently, each behind its own
   * circuit breaker (on a Redis Cluster: the primary that owns the call's first key). Undefined: one
   * scope for the whole store.
   */
  scopeOf?(entries: readonly StoreEntry[]): string | undefined
  /**
   * When the store's connection last became ready (monotonic ms, `performance.now()`), or -1 while it is
   * not ready; undefined when unknown. An open circuit breaker reads it: it probes as soon as the client
   * has reconnected, and sends no probe while it is known not to be connected.
   */
  readySince?(): number | undefined
  /** The limiter reports a call that passed its deadline (a store may recycle a connection that went silent). */
  onTimeout?(entries: readonly StoreEntry[]): void
  /**
   * Called by every limiter built on the store with its `timeoutMs`: a store that can abort a request
   * (Redis over HTTP) aborts it once the deadline has passed instead of leaving it running.
   */
  useDeadline?(timeoutMs: number): void
}
