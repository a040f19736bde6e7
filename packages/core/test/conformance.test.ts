import { describeStore, memoryFixture, type StoreFixture } from '@tollgate/testkit/store-suite'
import { glideFixture, ioredisFixture, iovalkeyFixture, nodeRedisFixture } from './clients'

describeStore('MemoryStore', memoryFixture)
describeStore('RedisStore (node-redis, RESP3)', () => nodeRedisFixture(3))
describeStore('RedisStore (node-redis, RESP2)', () => nodeRedisFixture(2))
describeStore('RedisStore (ioredis)', () => ioredisFixture())
describeStore('RedisStore (iovalkey)', () => iovalkeyFixture())
describeStore('RedisStore (Valkey GLIDE)', () => glideFixture())
// Batching is on by default (above); the same suite with every call as its own script:
describeStore('RedisStore (node-redis, batch: false)', () => nodeRedisFixture(3, { batch: false }))
describeStore('RedisStore (ioredis, batch: false)', () => ioredisFixture({ batch: false }))
describeStore('RedisStore (Valkey GLIDE, batch: false)', () => glideFixture({ batch: false }))
// storage: 'compact' keeps window counters as fields of shared hashes: no key per pair to read a TTL from
// (src/stores/redis/compact.test.ts checks the buckets' expiries instead).
const compact = { storage: 'compact', secret: 'conformance-suite-secret' } as const
const withoutKeys = async (fixture: Promise<StoreFixture>): Promise<StoreFixture> => {
  const { store, close, zcard } = await fixture
  return { store, close, zcard }
}
describeStore('RedisStore (node-redis, storage: compact)', () => withoutKeys(nodeRedisFixture(3, compact)))
describeStore('RedisStore (ioredis, storage: compact, batch: false)', () =>
  withoutKeys(ioredisFixture({ ...compact, batch: false })),
)
