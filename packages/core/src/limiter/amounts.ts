/**
 * Amounts a caller names: a call's `cost`, a refund's part of a spend, a settle's actual cost. Each is
 * a number for every pair or a record by policy name, every value a non-negative safe integer, checked
 * with an `InputError` naming the argument before any store command.
 * @module
 */
import { collapse } from '../cost'
import { InputError } from '../errors'
import type { CallOptions, PairCost, ResolvedPolicy, StoreEntry } from '../types'

/** A call's `cost` option: one number for every pair, or one per pair (policies not named cost 1). */
export function costOf(
  options: CallOptions | undefined,
  policies: readonly ResolvedPolicy[],
  byName: ReadonlyMap<string, ResolvedPolicy>,
): PairCost {
  if (options === undefined) return 1
  if (typeof options !== 'object' || options === null) throw new InputError('options', 'an object', options)
  const cost = options.cost
  if (cost === undefined) return 1
  if (typeof cost === 'number') {
    if (!Number.isSafeInteger(cost) || cost < 0)
      throw new InputError('cost', 'a non-negative safe integer', cost)
    return cost
  }
  const record = checkRecord(cost, 'cost', byName)
  const costs = new Array<number>(policies.length)
  for (let i = 0; i < policies.length; i++) {
    const name = policies[i]!.name
    costs[i] = Object.hasOwn(record, name) && record[name] !== undefined ? record[name] : 1
  }
  return collapse(costs)
}

/**
 * `value` (a number, or a record by policy name) per pair of `entries`, pairs the record does not name
 * at `unnamed`. InputError naming `argument`.
 */
export function amountsOf(
  value: unknown,
  entries: readonly StoreEntry[],
  argument: string,
  unnamed: number,
  byName: ReadonlyMap<string, ResolvedPolicy>,
): PairCost {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0)
      throw new InputError(argument, 'a non-negative safe integer', value)
    return value
  }
  const record = checkRecord(value, argument, byName)
  const costs = new Array<number>(entries.length)
  for (let i = 0; i < entries.length; i++) {
    const name = entries[i]!.policy.name
    costs[i] = Object.hasOwn(record, name) && record[name] !== undefined ? record[name] : unnamed
  }
  return collapse(costs)
}

/** A record of policy name to amount, each checked (InputError naming `argument.<name>`). */
export function checkRecord(
  value: unknown,
  argument: string,
  byName: ReadonlyMap<string, ResolvedPolicy>,
): Readonly<Record<string, number>> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InputError(argument, 'a non-negative safe integer or a record of policy name to one', value)
  }
  const record = value as Readonly<Record<string, unknown>>
  for (const name of Object.keys(record)) {
    if (!byName.has(name)) {
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
