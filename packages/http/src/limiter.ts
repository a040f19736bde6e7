/**
 * Framework-neutral HTTP handling shared by the adapters: the default key (canonical client IP, plus
 * the route template on a route), the call to the limiter and its answer (outcome.ts). An adapter only
 * maps its request and reply onto this.
 * @module
 */
import {
  ConfigError,
  type Decision,
  InputError,
  type KeyInput,
  RateLimiter,
  type RateLimiterOptions,
  type StoreErrorPolicy,
} from '@tollgate/core'
import {
  type CallCost,
  type CallLimits,
  CHANNELS,
  emit,
  inKeyScope,
  KEY_SCOPE,
  type OptionSchema,
} from '@tollgate/core/internal'
import type { HeaderFormat, RateLimitHeaderOptions } from './headers'
import { checkCost, checkLimits, settleInputs } from './inputs'
import { canonicalIp, resolveIpv6Subnet } from './ip'
import { isThenable, type MaybePromise } from './maybe-promise'
import { checkHttpOptions, type HttpLimiterOptions, type KeyInfo, LIMITER_OPTION_NAMES } from './options'
import {
  answer,
  type FixedCost,
  type HttpResult,
  headerCost,
  type OutcomeOptions,
  unsettled,
} from './outcome'
import { badRequestProblem, INTERNAL_ERROR_PROBLEM } from './problem'
import type { RequestFacts } from './request-facts'
import { warnInvalidInput } from './warnings'

/** Hoisted: the same answer to every request whose app function answered badly. */
const INTERNAL_ERROR: HttpResult = Object.freeze({ status: 500, headers: {}, body: INTERNAL_ERROR_PROBLEM })

/**
 * Validates adapter options once, at construction (the shared ones and the adapter's own, registered
 * as `adapterOptions`), and returns the per-request handler.
 *
 * @example
 * const http = createHttpLimiter<Request>(options, { onLimited: check.fn })
 * const result = await http.check(req, { ip: req.ip, route: req.route?.path })
 */
export function createHttpLimiter<Req>(
  options: HttpLimiterOptions<Req, any>,
  adapterOptions: OptionSchema = {},
): HttpLimiter<Req> {
  return new HttpLimiter(options, adapterOptions)
}

/** See {@link createHttpLimiter}. */
export class HttpLimiter<Req> implements OutcomeOptions<Req> {
  private readonly pick: (req: Req) => RateLimiter
  private readonly keyFn?: (req: Req, info: KeyInfo) => MaybePromise<KeyInput>
  /** `group:<name>`, what the default key carries instead of the route template. */
  private readonly group?: string
  /**
   * Whether the default key needs the matched route (`RequestFacts.route`): not with a `key` function or a
   * `group`. An adapter reads the route only then, so no request pays for a template nobody uses.
   */
  readonly needsRoute: boolean
  /** Whether the `settle` option is on (an adapter then settles a streamed body when it ends). */
  readonly settles: boolean
  private readonly costFn?: (req: Req) => MaybePromise<CallCost>
  private readonly limitsFn?: (req: Req) => MaybePromise<CallLimits>
  private readonly skip?: (req: Req) => MaybePromise<boolean>
  private readonly ipOptions: { ipv6Subnet: number | false }
  /** The functions whose bad answer was logged already (built on the first). */
  private logged?: Set<string>
  // What the outcome reads (outcome.ts gets this limiter as its OutcomeOptions): not for adapters.
  /** @internal */
  readonly fixedCost: FixedCost | undefined
  /** @internal */
  readonly format: HeaderFormat
  /** @internal */
  readonly legacy: boolean
  /** @internal */
  readonly refundOn?: (successful: boolean) => boolean
  /** @internal */
  readonly successful?: (req: Req, res: unknown) => MaybePromise<boolean>
  /** @internal */
  readonly actualCost?: (req: Req, res: unknown) => MaybePromise<CallCost | undefined>
  /** @internal */
  readonly shadow: boolean
  /** @internal */
  readonly onStoreError?: StoreErrorPolicy
  /** @internal */
  readonly headerOptions: RateLimitHeaderOptions

  constructor(options: HttpLimiterOptions<Req, any>, adapterOptions: OptionSchema) {
    const o = checkHttpOptions(options, adapterOptions) as HttpLimiterOptions<Req, any> &
      Record<string, unknown>
    if (o.limiter !== undefined) {
      const limiter = o.limiter
      if (limiter instanceof RateLimiter) this.pick = () => limiter
      else {
        this.pick = (req) => {
          const picked = limiter(req)
          if (!(picked instanceof RateLimiter)) throw new InputError('limiter(req)', 'a RateLimiter', picked)
          return picked
        }
      }
    } else {
      if (o.store === undefined) {
        throw new ConfigError(
          'limiter',
          'a RateLimiter (or inline limiter options with a store)',
          undefined,
          'type',
        )
      }
      const inline = LIMITER_OPTION_NAMES.filter((name) => o[name] !== undefined)
      const limiter = inKeyScope(
        (o as { [KEY_SCOPE]?: string | null })[KEY_SCOPE],
        () =>
          new RateLimiter(
            Object.fromEntries(inline.map((name) => [name, o[name]])) as unknown as RateLimiterOptions,
          ),
      )
      this.pick = () => limiter
    }
    this.limitsFn = o.limits
    this.keyFn = o.key
    this.skip = o.skip
    if (o.group !== undefined) {
      if (o.key !== undefined) {
        throw new ConfigError(
          'group',
          'omitted when key is given (the key function decides the whole key)',
          o.group,
          'type',
        )
      }
      this.group = `group:${o.group}`
    }
    this.needsRoute = this.keyFn === undefined && this.group === undefined
    if (typeof o.cost === 'function') this.costFn = o.cost
    this.format = o.headers ?? 'ietf'
    this.legacy = o.legacyHeaders ?? false
    this.shadow = o.shadow ?? false
    const failed = o.skipFailedRequests ?? false
    const succeeded = o.skipSuccessfulRequests ?? false
    if (failed && succeeded) this.refundOn = () => true
    else if (failed) this.refundOn = (ok) => !ok
    else if (succeeded) this.refundOn = (ok) => ok
    if (o.requestWasSuccessful !== undefined) {
      if (!failed && !succeeded) {
        throw new ConfigError(
          'requestWasSuccessful',
          'used with skipFailedRequests or skipSuccessfulRequests (alone it decides nothing)',
          o.requestWasSuccessful,
          'type',
        )
      }
      this.successful = o.requestWasSuccessful as (req: Req, res: unknown) => MaybePromise<boolean>
    }
    this.settles = o.settle !== undefined
    if (typeof o.settle === 'function') this.actualCost = o.settle
    else if (o.settle !== undefined) {
      const name = o.settle.header.toLowerCase()
      this.actualCost = (_req, res) => headerCost(res, name)
    }
    this.ipOptions = { ipv6Subnet: resolveIpv6Subnet(o.ipv6Subnet) }
    this.onStoreError = o.onStoreError
    this.headerOptions = { format: this.format, legacy: this.legacy, retryAfter: !this.shadow }
    // Hoisted: the call options of a fixed-cost route are the same object for every request.
    this.fixedCost = this.costFn
      ? undefined
      : {
          cost: (o.cost as CallCost | undefined) ?? 1,
          onStoreError: this.onStoreError,
          shadow: this.shadow || undefined,
        }
  }

  /**
   * The answer when an app function's answer is refused: a 500 without details, an `invalid-input` event,
   * and one log line per function, since the client can do nothing about it and the app must hear of it.
   */
  private invalidInput(error: InputError, limiter: RateLimiter | undefined): HttpResult {
    if (limiter !== undefined) {
      const { name, prefix, onEvent } = limiter
      if (onEvent !== undefined || CHANNELS['invalid-input']?.hasSubscribers) {
        emit(onEvent, { type: 'invalid-input', limiter: name, prefix, error })
      }
    } else if (CHANNELS['invalid-input']?.hasSubscribers) {
      emit(undefined, { type: 'invalid-input', limiter: '', prefix: '', error })
    }
    // One line per function (`key`, `key.account` and `key(req)` are one), not one per request.
    const fn = error.argument.split(/[.(]/)[0]!
    this.logged ??= new Set()
    if (!this.logged.has(fn)) {
      this.logged.add(fn)
      warnInvalidInput(error.message)
    }
    return INTERNAL_ERROR
  }

  /** The canonical client IP of a request (InputError, so a 400, when missing or unparseable). */
  clientIp(facts: RequestFacts): string {
    try {
      return canonicalIp(facts.ip, this.ipOptions)
    } catch {
      throw new InputError('client IP', 'a valid address (check the trust-proxy setting)', facts.ip)
    }
  }

  /**
   * The default key: canonical IP, plus the group (`group:<name>`) or else the route template for
   * route-level middleware. Never the method: one budget per route, whichever methods it answers (HEAD,
   * GET and the rest alike). A route template starts with `/`, so no group can share a route's budget.
   */
  defaultKey(facts: RequestFacts): string {
    const ip = this.clientIp(facts)
    const route = this.group ?? facts.route
    return route === undefined ? ip : `${ip} ${route}`
  }

  /**
   * Decides one request. Resolves `undefined` when `skip` says so. Never rejects for a denial or (under
   * a failure policy) a store outage or a `key`/`cost` function past the deadline; rejects only for
   * programming errors (a throwing `key` function). A function answering a value the limiter refuses
   * (an undefined key, a NaN cost) is answered 500, with an `invalid-input` event and a log line.
   */
  async check(req: Req, facts: RequestFacts): Promise<HttpResult | undefined> {
    if (this.skip !== undefined) {
      const skipped = this.skip(req)
      if (isThenable(skipped) ? await skipped : skipped) return undefined
    }
    let decision: Decision
    let limiter: RateLimiter | undefined
    // Set once the app's functions have answered: an InputError from then on is the limiter refusing an
    // answer (the app's bug, a 500), before it one the app threw or the client's address (a 400). A
    // `limiter(req)` answer is checked before any of them: its InputError is a 500 too.
    let answered = false
    try {
      limiter = this.pick(req)
      // Functions that answer synchronously cost no await and no deadline entry.
      // A closure, not a method: key functions destructure it (`(req, { ip }) => ip()`).
      const maybeKey =
        this.keyFn === undefined
          ? this.defaultKey(facts)
          : this.keyFn(req, { ip: () => this.clientIp(facts) })
      // Each input function runs after the ones before it have settled, as it would without a deadline.
      let maybeCost: MaybePromise<CallCost> | undefined
      if (this.costFn !== undefined && !isThenable(maybeKey)) maybeCost = this.costFn(req)
      const limitsFn = this.limitsFn
      const limitsNow = limitsFn !== undefined && !isThenable(maybeKey) && !isThenable(maybeCost)
      let maybeLimits = limitsNow ? limitsFn(req) : undefined
      let key: KeyInput
      let cost: CallCost | undefined
      if (isThenable(maybeKey) || isThenable(maybeCost) || isThenable(maybeLimits)) {
        // One deadline entry for every input still pending.
        const inputs = await settleInputs(
          limiter,
          req,
          maybeKey,
          maybeCost,
          this.costFn,
          limitsNow,
          maybeLimits,
          limitsFn,
        )
        if (inputs === undefined) return unsettled(this, limiter, req)
        key = inputs.key
        cost = inputs.cost
        maybeLimits = inputs.limits
      } else {
        key = maybeKey
        cost = maybeCost
      }
      answered = true
      if (this.costFn !== undefined) checkCost(cost)
      const limits = maybeLimits as CallLimits | undefined
      if (limitsFn === undefined) {
        decision = await limiter.consume(
          key,
          this.fixedCost ?? { cost, onStoreError: this.onStoreError, shadow: this.shadow || undefined },
        )
      } else {
        // undefined is not "the limiter's own limits": a plan that could not be read is refused, not widened
        checkLimits(limits)
        decision = await limiter.consume(key, {
          cost: this.fixedCost?.cost ?? cost,
          onStoreError: this.onStoreError,
          shadow: this.shadow || undefined,
          limits,
        })
      }
    } catch (error) {
      if (!(error instanceof InputError)) throw error
      // Bad per-request input is refused, never waved through.
      if (!answered && limiter !== undefined) {
        return { status: 400, headers: {}, body: badRequestProblem(error.message) }
      }
      return this.invalidInput(error, limiter)
    }
    return answer(this, limiter, decision, req)
  }
}
