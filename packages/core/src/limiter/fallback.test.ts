/**
 * The `'local'` failure policy during a real outage (the test's own redis-server, killed) must stay
 * strict when an attacker floods it with fresh identities: a counter that is still live is never
 * forgotten to make room, so an identity at its limit stays refused.
 */
import { type RedisServerHandle, sleepAtLeast as sleep, startRedisServer } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { RateLimiter, RedisStore } from '../index'

const FLOOD = 10_001 // one more than the fallback holds by default

describe("the 'local' fallback under an identity flood", () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  beforeAll(async () => {
    server = await startRedisServer()
    client = createClient({ url: server.url, socket: { reconnectStrategy: () => 100 } })
    client.on('error', () => {})
    await client.connect()
  })
  afterAll(async () => {
    try {
      client?.destroy()
    } catch {}
    await server?.stop()
  })

  it('an identity at its limit stays refused through three floods of 10,001 fresh identities', async () => {
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: uniquePrefix('flood'),
      limit: 5,
      // Exact and with no window boundary within the test: any admission past 5 is a forgotten counter.
      window: '1h',
      algorithm: 'sliding-log',
      onStoreError: 'local',
      denyCache: false,
    })
    expect((await limiter.consume('warm')).source).toBe('store')
    await server.kill()
    await sleep(200) // the client notices

    let victim = 0
    const hammer = async () => {
      for (let i = 0; i < 10; i++) {
        const d = await limiter.consume('victim')
        expect(d.source).toBe('fallback')
        if (d.allowed) victim++
      }
    }
    await hammer()
    const floods: number[] = []
    for (let flood = 0; flood < 3; flood++) {
      let admitted = 0
      for (let i = 0; i < FLOOD; i++) if ((await limiter.consume(`flood-${flood}-${i}`)).allowed) admitted++
      floods.push(admitted)
      await hammer()
    }
    console.log(
      `[local-fallback] victim admitted ${victim} of 40 (limit 5) across 3 floods of ${FLOOD}; ` +
        `flood identities admitted per flood: ${floods.join(', ')}`,
    )
    expect(victim).toBe(5)
    await server.start()
  }, 60_000)
})
