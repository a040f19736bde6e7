import { describeStore, memoryFixture } from '@tollgate/testkit/store-suite'
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
