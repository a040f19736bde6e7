import { describeStore, memoryFixture } from '../../testkit/src/store-suite'
import { ioredisFixture, nodeRedisFixture } from './clients'

describeStore('MemoryStore', memoryFixture)
describeStore('RedisStore (node-redis, RESP3)', () => nodeRedisFixture(3))
describeStore('RedisStore (node-redis, RESP2)', () => nodeRedisFixture(2))
describeStore('RedisStore (ioredis)', ioredisFixture)
