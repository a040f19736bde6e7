/** SCRIPT FLUSH between two calls changes nothing visible: one EVAL re-caches, then EVALSHA again. */

import { type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import Redis from 'ioredis'
import { createClient } from 'redis'
import { uniquePrefix } from '../../testkit/src/store-suite'
import { RateLimiter, RedisStore } from '../src'
import * as scripts from '../src/entries/scripts'
import { nodeRedis } from './clients'

function commandCalls(info: string, name: string): number {
  const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)
  return m ? Number(m[1]) : 0
}

describe('NOSCRIPT recovery', () => {
  it('the generated SHA1s are the ones Redis computes', async () => {
    const client = await nodeRedis()
    for (const s of [scripts.CONSUME, scripts.PEEK, scripts.REFUND, scripts.RESET]) {
      expect(await client.scriptLoad(s.source)).toBe(s.sha1)
    }
    await client.quit()
  })

  // A server of its own: SCRIPT FLUSH and the command counters are server-wide, and other test files
  // share the suite's Redis (their re-EVALs would be counted here).
  let own: RedisServerHandle
  beforeAll(async () => {
    own = await startRedisServer()
  })
  afterAll(async () => {
    await own?.stop()
  })

  it.each(['node-redis', 'ioredis'] as const)('%s: SCRIPT FLUSH mid-stream is invisible', async (kind) => {
    const admin = createClient({ url: own.url }).on('error', () => {})
    await admin.connect()
    const client =
      kind === 'ioredis'
        ? await readyRedis(own.url)
        : await createClient({ url: own.url })
            .on('error', () => {})
            .connect()
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: uniquePrefix('flush'),
      limit: 5,
      window: '1d',
    })
    expect((await limiter.consume('k')).remaining).toBe(4)
    await admin.scriptFlush()
    await admin.configResetStat()
    expect((await limiter.consume('k')).remaining).toBe(3) // state kept, no error
    expect((await limiter.consume('k')).remaining).toBe(2)
    const info = await admin.info('commandstats')
    expect(commandCalls(info, 'eval')).toBe(1) // one EVAL after NOSCRIPT...
    expect(commandCalls(info, 'evalsha')).toBe(2) // ...then EVALSHA again (the failed one + the next)
    await admin.quit()
    if (client instanceof Redis) client.disconnect()
    else await client.quit()
  })

  it('other script errors are not retried and surface as StoreError', async () => {
    const client = await nodeRedis()
    const admin = await nodeRedis()
    await admin.configResetStat()
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: uniquePrefix('err'),
      limit: 5,
      window: '1m',
    })
    await admin.set(limiter.keysFor('k')[0], 'x')
    // A sliding-window key pre-created as a string is repaired, never admitted as unlimited.
    expect((await limiter.consume('k')).remaining).toBe(4)
    await client.quit()
    await admin.quit()
  })
})

/** Calls made before 'ready' get the failure policy (they never wait in the client's offline queue). */
async function readyRedis(url: string): Promise<Redis> {
  const client = new Redis(url)
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
  return client
}
