/**
 * The store conformance suite: the same expectations for every `Store` (MemoryStore, RedisStore over
 * node-redis RESP2/RESP3, ioredis, and a cluster), one file of store-suite/ per concern, composed here.
 * Call it inside a test file:
 *
 *   describeStore('RedisStore (ioredis)', async () => ({ store, close, pttl, exists, zcard }))
 * @module
 */
import { describeAlgorithms } from './store-suite/algorithms'
import { describeConcurrency } from './store-suite/concurrency'
import { type StoreFixture, storeSuiteContext } from './store-suite/context'
import { describePenalties } from './store-suite/penalties'
import { describeSeveralPolicies } from './store-suite/policies'
import { describeSettle } from './store-suite/settle'

export { ALL_ALGORITHMS, memoryFixture, type StoreFixture, uniquePrefix } from './store-suite/context'

/** Registers the conformance tests for one store. */
export function describeStore(name: string, makeFixture: () => Promise<StoreFixture>): void {
  describe(`store conformance: ${name}`, () => {
    const context = storeSuiteContext(makeFixture)
    describeAlgorithms(context)
    describeSeveralPolicies(context)
    describePenalties(context)
    describeSettle(context)
    describeConcurrency(context)
  })
}
