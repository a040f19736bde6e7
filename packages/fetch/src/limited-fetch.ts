/**
 * `limitedFetch`: outbound calls to an upstream that limits the caller (an LLM provider's requests and
 * tokens per minute), admitted by one Tollgate limiter that every process of the fleet shares, and kept in
 * line with what the upstream itself reports in its responses.
 * @module
 */
import {
  type CallOptions,
  ConfigError,
  type Decision,
  RateLimitedError,
  RateLimiter,
  RateLimitTimeoutError,
} from '@tollgate/core'
import { type UpstreamBudget, upstreamLimits } from './upstream-limits'

type MaybePromise<T> = T | Promise<T>
type FetchInput = string | URL | Request
type FetchFn = (input: FetchInput, init?: RequestInit) => Promise<Response>

/**
 * Options of {@link limitedFetch}.
 * @example
 * const options: LimitedFetchOptions = {
 *   limiter, // policies `requests` (500 per minute) and `tokens` (30,000 per minute)
 *   key: () => 'openai:team-a',
 *   cost: (input, init) => ({ tokens: estimateTokens(init?.body) }), // requests: 1
 *   tokensOf: async (res) => (await res.json()).usage?.total_tokens,
 * }
 */
export interface LimitedFetchOptions {
  /** The limiter every process shares: its policies are the budgets of one upstream account. */
  limiter: RateLimiter
  /**
   * The budget a call spends from. Return the same text on every process for one upstream account.
   * @default the URL's origin (`https://api.openai.com`)
   */
  key?: (input: FetchInput, init: RequestInit | undefined) => MaybePromise<string>
  /**
   * What a call costs before it is sent: a number for every policy, or costs by policy name (policies
   * not named cost 1), e.g. `{ tokens: estimate }`. An estimate is fine when `tokensOf` settles it.
   * @default 1 on every policy
   */
  cost?: (input: FetchInput, init: RequestInit | undefined) => MaybePromise<number | Record<string, number>>
  /**
   * The tokens the call actually used, read from the response (it gets a clone, so your own read is
   * untouched): the `tokens` policy is settled to it once the body has been read. Undefined or a throw
   * keeps the estimate charged.
   * @default none: the estimate stays charged
   * @example
   * tokensOf: async (res) => (await res.json()).usage?.total_tokens
   */
  tokensOf?: (response: Response) => MaybePromise<number | undefined>
  /**
   * What a call does when the budget is spent: wait for it, at most `maxWaitMs` in all (then
   * `RateLimitTimeoutError`), or `false` to fail at once with `RateLimitedError` (its
   * `decision.retryAfterMs` says when to come back). Either way the upstream is not called.
   * @default { maxWaitMs: 60_000 }
   */
  wait?: { maxWaitMs?: number } | false
  /**
   * Which policy of the limiter follows which budget the upstream reports, or `false` for none.
   * @default requests: the policy named `requests` (or the only policy); tokens: the one named `tokens`
   */
  follow?: { requests?: string | false; tokens?: string | false }
  /**
   * The fetch to wrap.
   * @default globalThis.fetch, looked up at each call
   */
  fetch?: FetchFn
}

/** A fetch whose calls spend from a shared budget; `flush()` resolves once pending settlements ended. */
export interface LimitedFetch {
  (input: FetchInput, init?: RequestInit): Promise<Response>
  /** Waits for the settlements still reading response bodies (`tokensOf`), e.g. before shutdown. */
  flush(): Promise<void>
}

// Keys whose holds this process remembers: bounded, oldest forgotten first.
const MAX_KEYS = 10_000
const DEFAULT_MAX_WAIT_MS = 60_000
// A 429 that says nothing of when to come back: hold the key this long.
const BARE_429_HOLD_MS = 1000

/** What this process learnt about one key from the upstream's responses. */
interface Learnt {
  /** Until when (Date.now() ms) the upstream refuses this key: no call is sent before. */
  holdUntil?: number
}

/**
 * Wraps `fetch` so that every call first spends from a limiter shared by the whole fleet, keyed per
 * upstream (and account, through `key`). The limiter follows what the upstream reports: when a response
 * says fewer requests or tokens remain than the limiter counts, the difference is spent on the shared
 * budget, so every process sees it until the limiter resets (and the next response teaches it again);
 * a 429 (or nothing left) holds the key until the upstream's reset. A call that finds the budget spent
 * waits (bounded) or throws, and never reaches the upstream. The upstream's own 429 is returned as it came.
 *
 * @example
 * import { RateLimiter, RedisStore } from '@tollgate/core'
 * import { limitedFetch } from '@tollgate/fetch'
 *
 * const limiter = new RateLimiter({
 *   store: new RedisStore(redis),
 *   prefix: 'openai',
 *   policies: { requests: { limit: 500, window: '1m' }, tokens: { limit: 30_000, window: '1m' } },
 * })
 * const openai = limitedFetch({
 *   limiter,
 *   cost: (input, init) => ({ tokens: 1000 }),
 *   tokensOf: async (res) => (await res.json()).usage?.total_tokens,
 * })
 * const res = await openai('https://api.openai.com/v1/chat/completions', { method: 'POST', body })
 */
export function limitedFetch(options: LimitedFetchOptions): LimitedFetch {
  const { limiter, key = originOf, cost, tokensOf, wait = {}, follow = {}, fetch: inner } = checked(options)
  const maxWaitMs = wait === false ? undefined : (wait.maxWaitMs ?? DEFAULT_MAX_WAIT_MS)
  const names = limiter.policies.map((p) => p.name)
  const requestsPolicy = pick(follow.requests, names, 'requests', names.length === 1 ? names[0] : undefined)
  const tokensPolicy = pick(follow.tokens, names, 'tokens', undefined)
  const learnt = new Map<string, Learnt>()
  const pending = new Set<Promise<void>>()

  const remember = (id: string): Learnt => {
    let entry = learnt.get(id)
    if (entry === undefined) {
      if (learnt.size >= MAX_KEYS) learnt.delete(learnt.keys().next().value!)
      entry = {}
      learnt.set(id, entry)
    }
    return entry
  }

  /**
   * Spends what the shared count has beyond what the upstream says remains, on one policy, so that every
   * process (whatever it learnt itself) sees the upstream's number until the limiter's own reset.
   */
  async function follows(
    id: string,
    policy: string,
    budget: UpstreamBudget,
    believed: number,
  ): Promise<void> {
    const remaining = budget.remaining
    // the usual answer (the upstream has at least what the fleet believes): no round trip
    if (remaining === undefined || remaining >= believed) return
    const now = await limiter.peek(id, { cost: 0 })
    const counted = now.policies.find((p) => p.policy === policy)?.remaining ?? 0
    if (counted <= remaining) return
    // one atomic spend: if others spent meanwhile it is refused, and the count is already as low
    const spend: Record<string, number> = {}
    for (const name of names) spend[name] = name === policy ? counted - remaining : 0
    await limiter.consume(id, { cost: spend })
  }

  /** Learns from one response's fields; with `tokensLater` the tokens policy is compared once settled. */
  async function learn(id: string, decision: Decision, response: Response, tokensLater: boolean) {
    const reported = upstreamLimits(response.headers)
    let { requests, tokens } = reported
    if (response.status === 429) {
      // refused: what is exhausted is spent for the whole fleet, and this process waits for the reset
      const exhausted = tokens?.remaining === 0 ? 'tokens' : 'requests'
      if (exhausted === 'tokens') tokens = { ...tokens, remaining: 0 }
      else requests = { ...requests, remaining: 0 }
      const holdMs =
        reported.retryAfterMs ??
        (exhausted === 'tokens' ? tokens?.resetMs : requests?.resetMs) ??
        BARE_429_HOLD_MS
      hold(id, holdMs)
    } else {
      for (const budget of [requests, tokens]) {
        if (budget?.remaining === 0 && budget.resetMs !== undefined) hold(id, budget.resetMs)
      }
    }
    const believed = (policy: string) => decision.policies.find((p) => p.policy === policy)?.remaining ?? 0
    const work: Promise<void>[] = []
    if (requestsPolicy !== undefined && requests !== undefined)
      work.push(follows(id, requestsPolicy, requests, believed(requestsPolicy)))
    if (tokensPolicy !== undefined && tokens !== undefined && !tokensLater)
      work.push(follows(id, tokensPolicy, tokens, believed(tokensPolicy)))
    await Promise.all(work)
    return tokens
  }

  function hold(id: string, ms: number): void {
    const entry = remember(id)
    const until = Date.now() + ms
    if (ms > 0 && (entry.holdUntil === undefined || entry.holdUntil < until)) entry.holdUntil = until
  }

  /** Settles the tokens policy to what the response reports, then compares it with the upstream's count. */
  async function settleTokens(
    id: string,
    decision: Decision,
    estimate: number,
    response: Response,
    tokens: UpstreamBudget | undefined,
  ) {
    const policy = tokensPolicy!
    let believed = decision.policies.find((p) => p.policy === policy)?.remaining ?? 0
    const used = await tokensOf!(response)
    if (used !== undefined && Number.isSafeInteger(used) && used >= 0) {
      await limiter.settle(decision, { [policy]: used })
      // what the fleet now counts, had nobody else spent: the upstream's report is compared with that
      believed = Math.max(0, believed + estimate - used)
    }
    if (tokens !== undefined) await follows(id, policy, tokens, believed)
  }

  /** Waits out (or refuses) a hold this process learnt, before spending from the limiter. */
  async function heldOff(id: string, call: CallOptions, started: number, signal?: AbortSignal | null) {
    const until = learnt.get(id)?.holdUntil
    const left = until === undefined ? 0 : until - Date.now()
    if (left <= 0) return
    if (maxWaitMs !== undefined && Date.now() - started + left <= maxWaitMs) {
      // a timer can fire a little early: the upstream's reset is a moment, so sleep until it has passed
      for (let ms = left; ms > 0; ms = until! - Date.now()) await sleep(ms, signal ?? undefined)
      return
    }
    const state = await limiter.peek(id, call)
    const refused = { ...state, allowed: false, retryAfterMs: Math.max(state.retryAfterMs, left) }
    throw maxWaitMs === undefined
      ? new RateLimitedError(refused)
      : new RateLimitTimeoutError(refused, maxWaitMs)
  }

  async function limited(input: FetchInput, init?: RequestInit): Promise<Response> {
    const started = Date.now()
    const id = await key(input, init)
    const callCost = cost === undefined ? undefined : await cost(input, init)
    const call: CallOptions = callCost === undefined ? {} : { cost: callCost }
    await heldOff(id, call, started, init?.signal)
    let decision: Decision
    if (maxWaitMs === undefined) {
      decision = await limiter.consume(id, call)
      if (!decision.allowed) throw new RateLimitedError(decision)
    } else {
      const left = Math.max(0, maxWaitMs - (Date.now() - started))
      decision = await limiter.wait(id, {
        ...call,
        maxWaitMs: left,
        ...(init?.signal && { signal: init.signal }),
      })
    }
    const response = await (inner ?? globalThis.fetch)(input, init)
    const tokensLater = tokensOf !== undefined && tokensPolicy !== undefined
    // the store may be down: the response is still the caller's, only the learning is lost
    const tokens = await learn(id, decision, response, tokensLater).catch(() => undefined)
    if (tokensLater) {
      const estimate = estimateOf(callCost, tokensPolicy!)
      const task = settleTokens(id, decision, estimate, response.clone(), tokens).catch(() => {})
      pending.add(task)
      void task.finally(() => pending.delete(task))
    }
    return response
  }

  return Object.assign(limited, {
    flush: async () => {
      while (pending.size > 0) await Promise.all(pending)
    },
  })
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts (the caller gave up). */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted()
    const abort = () => {
      clearTimeout(timer)
      reject(signal!.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', abort, { once: true })
  })
}

/** The default key: the upstream's origin. */
function originOf(input: FetchInput): string {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url
  return new URL(url).origin
}

/** The units a call's cost charges one policy (policies a record does not name cost 1, as in core). */
function estimateOf(callCost: number | Record<string, number> | undefined, policy: string): number {
  if (callCost === undefined) return 1
  if (typeof callCost === 'number') return callCost
  return callCost[policy] ?? 1
}

/** The policy that follows one reported budget: the option's, or the default when it names one. */
function pick(
  chosen: string | false | undefined,
  names: readonly string[],
  byName: string,
  fallback: string | undefined,
): string | undefined {
  if (chosen === false) return undefined
  if (chosen !== undefined) return chosen
  return names.includes(byName) ? byName : fallback
}

/** The options, checked once (ConfigError naming the option and the value). */
function checked(options: LimitedFetchOptions): LimitedFetchOptions {
  if (typeof options !== 'object' || options === null)
    throw new ConfigError('options', 'an object', options, 'type')
  const { limiter, key, cost, tokensOf, wait, follow, fetch } = options
  if (!(limiter instanceof RateLimiter)) throw new ConfigError('limiter', 'a RateLimiter', limiter, 'type')
  for (const [name, value] of [
    ['key', key],
    ['cost', cost],
    ['tokensOf', tokensOf],
    ['fetch', fetch],
  ] as const) {
    if (value !== undefined && typeof value !== 'function')
      throw new ConfigError(name, 'a function', value, 'type')
  }
  if (wait !== undefined && wait !== false) {
    if (typeof wait !== 'object' || wait === null)
      throw new ConfigError('wait', 'false or { maxWaitMs }', wait, 'type')
    const ms = wait.maxWaitMs
    if (ms !== undefined && (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0))
      throw new ConfigError('wait.maxWaitMs', 'a non-negative finite number of milliseconds', ms)
  }
  if (follow !== undefined && (typeof follow !== 'object' || follow === null))
    throw new ConfigError('follow', 'an object { requests?, tokens? }', follow, 'type')
  const names = limiter.policies.map((p) => p.name)
  if (tokensOf !== undefined && follow?.tokens === false)
    throw new ConfigError(
      'tokensOf',
      'omitted when follow.tokens is false (no policy to settle)',
      tokensOf,
      'type',
    )
  if (tokensOf !== undefined && follow?.tokens === undefined && !names.includes('tokens'))
    throw new ConfigError(
      'tokensOf',
      "omitted unless the limiter has a policy named 'tokens' (or follow.tokens names one)",
      tokensOf,
      'type',
    )
  for (const dimension of ['requests', 'tokens'] as const) {
    const name = follow?.[dimension]
    if (name !== undefined && name !== false && !names.includes(name))
      throw new ConfigError(
        `follow.${dimension}`,
        `false or a policy of the limiter (${names.join(', ')})`,
        name,
      )
  }
  return options
}
