/**
 * Answers of user functions (`key`, `cost`, `skip`, ...) that may come now or later: a synchronous
 * answer is used as is, with no await and no deadline entry.
 * @module
 */

/** A value, or a promise of one. */
export type MaybePromise<T> = T | Promise<T>

/** Whether an answer is a promise (anything with a `then` method). */
export function isThenable<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | undefined)?.then === 'function'
}
