/**
 * What a decision becomes for the adapter (status, headers, problem body), and what happens once the
 * response is known: refunds under skipFailedRequests / skipSuccessfulRequests, the `settle` option's
 * true cost, the end of concurrency leases.
 * @module
 */
import { type Decision, RateLimitError, type RateLimiter, type StoreErrorPolicy } from '@tollgate/core'
import { type CallCost, spentFromStore } from '@tollgate/core/internal'
import { type HeaderFormat, type RateLimitHeaderOptions, rateLimitHeaders } from './headers'
import { isThenable, type MaybePromise } from './maybe-promise'
import { isCount } from './options'
import { type ProblemDetails, problemDetails, problemDetailsText, unavailableProblem } from './problem'

/** What the adapter must do with a request. */
export interface HttpResult {
  /**
   * 200 = let the request through; 429 refused; 503 store down under `deny`; 400 input the client caused
   * (an unreadable forwarded IP, an `InputError` the app's own function threw); 500 an app function's
   * answer the limiter refuses (a bug in the app).
   */
  readonly status: 200 | 400 | 429 | 500 | 503
  readonly decision?: Decision
  /** Header name to value, to set on the response whatever the status. */
  readonly headers: Record<string, string>
  /** The `application/problem+json` body for a non-200 status. */
  readonly body?: ProblemDetails
  /**
   * `body` as JSON text when the HTTP layer has it at hand (a 429's): send it rather than stringifying
   * `body`, which has the same text.
   */
  readonly bodyText?: string
  /**
   * Call with the final status code and the framework's response once the response is sent (refunds under
   * skipFailed/SuccessfulRequests, asking `requestWasSuccessful` when set; without `res`, the status decides).
   * Returns the refund in flight, if any, for runtimes that end a request's I/O with its response
   * (Workers: hand it to `waitUntil`); it never rejects.
   */
  readonly settle?: (statusCode: number, res?: unknown) => Promise<void> | undefined
  /**
   * Set when the decision holds concurrency leases or the `settle` option is on: call it, with the
   * framework's response, when the response ends without a status to settle on (the client went away,
   * the connection closed, the handler threw past the adapter). Ends the leases and settles the cost
   * unless `settle` already did; harmless to call more than once or after `settle`. `settle` itself does
   * both too, so an adapter calls `settle` on a finished response and `release` on close.
   */
  readonly release?: (res?: unknown) => Promise<void> | undefined
}

/** The call options of a fixed-cost route: one object for every request. */
export interface FixedCost {
  readonly cost: CallCost
  readonly onStoreError?: StoreErrorPolicy
  readonly shadow?: boolean
}

/**
 * The checked options the outcome depends on, fixed at construction (the HTTP limiter holds them and
 * passes itself, so no request builds an object for them).
 */
export interface OutcomeOptions<Req> {
  readonly format: HeaderFormat
  readonly legacy: boolean
  readonly shadow: boolean
  /** Hoisted: the header options are the same for every request. */
  readonly headerOptions: RateLimitHeaderOptions
  /** Whether a request that succeeded (true) or failed (false) is refunded. */
  readonly refundOn?: (successful: boolean) => boolean
  readonly successful?: (req: Req, res: unknown) => MaybePromise<boolean>
  /** The `settle` option: the true cost of a finished (or abandoned) request. */
  readonly actualCost?: (req: Req, res: unknown) => MaybePromise<CallCost | undefined>
  readonly onStoreError?: StoreErrorPolicy
  readonly fixedCost: FixedCost | undefined
}

/** The adapter's answer to a decision, with what to do once the response is known. */
export function answer<Req>(
  o: OutcomeOptions<Req>,
  limiter: RateLimiter,
  decision: Decision,
  req: Req,
): HttpResult {
  const headers =
    o.format === false && !o.legacy && decision.allowed ? {} : rateLimitHeaders(decision, o.headerOptions)
  if (decision.source === 'fallback' && !decision.allowed) {
    return { status: 503, decision, headers, body: unavailableProblem(decision.retryAfterMs) }
  }
  if (o.actualCost && decision.allowed && spentFromStore(decision) && decision.refundToken) {
    return { status: 200, decision, headers, ...settlement(o, limiter, decision, req) }
  }
  if (limiter.leases && decision.allowed && decision.refundToken !== undefined) {
    return { status: 200, decision, headers, ...leaseEnd(o, limiter, decision, req) }
  }
  const settle =
    o.refundOn && decision.allowed && spentFromStore(decision)
      ? (statusCode: number, res?: unknown) => refundIfDue(o, limiter, decision, req, statusCode, res)
      : undefined
  if (decision.allowed || o.shadow) return { status: 200, decision, headers, settle }
  return {
    status: 429,
    decision,
    headers,
    body: problemDetails(decision),
    bodyText: problemDetailsText(decision),
  }
}

/**
 * The answer when `key` or `cost` did not settle before the deadline: the failure policy, as for a store
 * outage. `'local'` has no identity to charge locally, so it refuses like `'deny'`.
 */
export function unsettled<Req>(o: OutcomeOptions<Req>, limiter: RateLimiter, req: Req): HttpResult {
  const allowed = (o.onStoreError ?? limiter.onStoreError) === 'allow'
  return answer(
    o,
    limiter,
    {
      allowed,
      limit: 0,
      remaining: 0,
      resetMs: 0,
      retryAfterMs: allowed ? 0 : limiter.breaker.retryInMs(),
      cost: costNumber(o.fixedCost?.cost ?? 1),
      policies: [],
      binding: -1,
      source: 'fallback',
    },
    req,
  )
}

/** Refunds a finished request when its outcome says so. */
function refundIfDue<Req>(
  o: OutcomeOptions<Req>,
  limiter: RateLimiter,
  decision: Decision,
  req: Req,
  statusCode: number,
  res: unknown,
): Promise<void> | undefined {
  const refund = refunds(o, req, statusCode, res)
  if (isThenable(refund)) {
    return refund.then((yes) => (yes ? limiter.refund(decision) : undefined)).then(noop, ignore)
  }
  return refund ? limiter.refund(decision).then(noop, ignore) : undefined
}

/**
 * Whether a finished request is refunded under skipFailedRequests / skipSuccessfulRequests: the status,
 * or `requestWasSuccessful` when set and given the response. A predicate that throws, rejects or answers
 * anything but a boolean counts the request (false): it can never hand out a free one. Never rejects.
 */
function refunds<Req>(
  o: OutcomeOptions<Req>,
  req: Req,
  statusCode: number,
  res: unknown,
): MaybePromise<boolean> {
  const refundOn = o.refundOn
  if (refundOn === undefined) return false
  let ok: MaybePromise<boolean>
  if (o.successful === undefined || res === undefined) ok = statusCode < 400
  else {
    try {
      ok = o.successful(req, res)
    } catch {
      return false
    }
  }
  if (isThenable(ok))
    return ok.then(
      (v) => typeof v === 'boolean' && refundOn(v),
      () => false,
    )
  return typeof ok === 'boolean' && refundOn(ok)
}

/**
 * `settle` and `release` under the `settle` option: whichever runs first settles the spend to the true
 * cost (unless skipFailed/SuccessfulRequests refunds it), then ends any leases, once.
 */
function settlement<Req>(
  o: OutcomeOptions<Req>,
  limiter: RateLimiter,
  decision: Decision,
  req: Req,
): Pick<HttpResult, 'settle' | 'release'> {
  let ended = false
  const leases = limiter.leases
  const charge = (res: unknown): Promise<void> => {
    let cost: MaybePromise<CallCost | undefined>
    try {
      cost = o.actualCost!(req, res)
    } catch {
      cost = undefined
    }
    // a record goes to settle() as it is, which refuses a bad one (the spend then stands)
    const apply = (n: CallCost | undefined) =>
      isCount(n) || (typeof n === 'object' && n !== null) ? limiter.settle(decision, n) : undefined
    const settled = isThenable(cost) ? cost.then(apply, noop) : Promise.resolve(apply(cost))
    return leases ? settled.finally(() => limiter.release(decision)) : settled
  }
  return {
    settle: (statusCode, res) => {
      if (ended) return undefined
      ended = true
      const refund = refunds(o, req, statusCode, res)
      const end = (yes: boolean) => (yes ? limiter.refund(decision) : charge(res))
      return (isThenable(refund) ? refund.then(end) : end(refund)).then(noop, ignore)
    },
    release: (res) => {
      if (ended) return undefined
      ended = true
      return charge(res).then(noop, ignore)
    },
  }
}

/**
 * `settle` and `release` of a decision holding leases: whichever runs first ends them, once. A refund
 * (skipFailedRequests / skipSuccessfulRequests) gives back every pair's spend, the leases included.
 */
function leaseEnd<Req>(
  o: OutcomeOptions<Req>,
  limiter: RateLimiter,
  decision: Decision,
  req: Req,
): Pick<HttpResult, 'settle' | 'release'> {
  let ended = false
  const end = (refund: boolean) => (refund ? limiter.refund(decision) : limiter.release(decision))
  return {
    settle: (statusCode, res) => {
      if (ended) return undefined
      ended = true
      const refund = decision.source === 'store' ? refunds(o, req, statusCode, res) : false
      return (isThenable(refund) ? refund.then(end) : end(refund)).then(noop, ignore)
    },
    release: () => {
      if (ended) return undefined
      ended = true
      return limiter.release(decision).then(noop, ignore)
    },
  }
}

/** A response header's value as a cost (Node's `getHeader`, Fetch `Headers`), or undefined. */
export function headerCost(res: unknown, name: string): number | undefined {
  const r = res as { getHeader?: (n: string) => unknown; headers?: { get?: (n: string) => unknown } }
  let value: unknown
  if (typeof r?.getHeader === 'function') value = r.getHeader(name)
  else if (typeof r?.headers?.get === 'function') value = r.headers.get(name)
  if (typeof value === 'number') return value
  if (typeof value !== 'string' || !/^\d{1,16}$/.test(value.trim())) return undefined
  return Number(value.trim())
}

/** What a failure-policy decision reports as its cost: the largest of a record's. */
function costNumber(cost: CallCost): number {
  return typeof cost === 'number' ? cost : Math.max(0, ...Object.values(cost).filter(isCount))
}

function ignore(error: unknown): void {
  // A failed refund only means the spend stands: the conservative outcome. Store errors are reported
  // through the limiter's events; anything else is a bug worth surfacing.
  if (!(error instanceof RateLimitError))
    queueMicrotask(() => {
      throw error
    })
}

function noop(): void {}
