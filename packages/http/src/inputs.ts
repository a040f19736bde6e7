/**
 * The per-request inputs an adapter's options compute (`key`, `cost`, `limits`): awaited under the
 * limiter's deadline when a function answers with a promise, and checked before they reach Redis.
 * @module
 */
import { InputError, type KeyInput, type RateLimiter, StoreTimeoutError } from '@tollgate/core'
import type { CallCost, CallLimits } from '@tollgate/core/internal'
import type { MaybePromise } from './maybe-promise'

/** The inputs once every one of them has settled. */
export interface SettledInputs {
  readonly key: KeyInput
  readonly cost: CallCost | undefined
  readonly limits: CallLimits | undefined
}

/**
 * Awaits an async key, cost and limits under the limiter's deadline, one entry for all of them (the
 * same single-timer queue as its store calls). A function not called yet (because one before it had
 * not settled) is called once those before it have, as it would be without a deadline. Resolves
 * `undefined` past the deadline; a function that throws still rejects (a 500).
 *
 * @param cost the cost function's answer, or undefined when it has not been called
 * @param limitsCalled whether `limits` is the limits function's answer already
 */
export async function settleInputs<Req>(
  limiter: RateLimiter,
  req: Req,
  key: MaybePromise<KeyInput>,
  cost: MaybePromise<CallCost> | undefined,
  costFn: ((req: Req) => MaybePromise<CallCost>) | undefined,
  limitsCalled: boolean,
  limits: MaybePromise<CallLimits | undefined>,
  limitsFn: ((req: Req) => MaybePromise<CallLimits>) | undefined,
): Promise<SettledInputs | undefined> {
  const all = async (): Promise<SettledInputs> => {
    const settledKey = await key
    const settledCost = cost !== undefined || costFn === undefined ? await cost : await costFn(req)
    const settledLimits = limitsCalled || limitsFn === undefined ? await limits : await limitsFn(req)
    return { key: settledKey, cost: settledCost, limits: settledLimits }
  }
  try {
    return await limiter.deadlines.run(all())
  } catch (error) {
    if (error instanceof StoreTimeoutError) return undefined
    throw error
  }
}

/**
 * Checks a cost function's answer, by its name: undefined must not become the default 1. A record
 * (costs by policy) is checked by the limiter, value by value.
 */
export function checkCost(cost: unknown): void {
  if (
    !(Number.isSafeInteger(cost) && (cost as number) >= 0) &&
    (typeof cost !== 'object' || cost === null || Array.isArray(cost))
  ) {
    throw new InputError('cost(req)', 'a non-negative safe integer or a record of costs by policy', cost)
  }
}

/** Checks a limits function's answer: undefined is not "the limiter's own limits" (a plan unread is refused). */
export function checkLimits(limits: CallLimits | undefined): asserts limits is CallLimits {
  if (limits === undefined) throw new InputError('limits(req)', 'a limit or a record of limits', limits)
}
