/**
 * Checked reads for tests under `noUncheckedIndexedAccess`: a missing element or value fails the test
 * with what was looked for, where a `!` would let `undefined` through to a less telling error later.
 * @module
 */

/** `items[index]` (a negative index counts from the end), or an error naming the index and length. */
export function at<T>(items: ArrayLike<T>, index: number): T {
  const item = items[index < 0 ? items.length + index : index]
  if (item === undefined) throw new Error(`expected an element at index ${index} of ${items.length}`)
  return item
}

/** `value`, or an error naming `what` when it is `undefined`. */
export function defined<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`expected ${what} to be defined`)
  return value
}

type Tuple<T, N extends number, R extends T[] = []> = R['length'] extends N ? R : Tuple<T, N, [...R, T]>

/**
 * The first `n` of `items` as a tuple, for destructuring (`const [a, b] = take(keys, 2)`), or an error
 * when there are fewer or one of them is `undefined`.
 */
export function take<T, N extends number>(items: ArrayLike<T>, n: N): Tuple<T, N> {
  const out: T[] = []
  for (let i = 0; i < n; i++) out.push(at(items, i))
  return out as Tuple<T, N>
}
