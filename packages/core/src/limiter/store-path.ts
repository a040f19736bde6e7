/**
 * A limiter's way to the store and its failure policy, for the calls made outside `consume` itself
 * (the reserve's refills, shadow's second call). Its own file: store calls and the failure policy both
 * build on it without importing each other.
 * @module
 */
import type { Store } from '../types'
import type { DecisionContext } from './decision'
import type { Fallback } from './fallback'
import type { StoreCalls } from './store-calls'

export interface StorePath {
  readonly calls: StoreCalls
  readonly store: Store
  readonly ctx: DecisionContext
  readonly fallback: Fallback
}
