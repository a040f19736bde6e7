/**
 * Penalties across OS processes: 4 children with warmed connections, released together, 50 consumes each
 * on one identity whose policy (5 a day) blocks it at its first refusal.
 *
 * Per algorithm: the first round admits exactly 5 and starts a block; the policy's own state is then
 * wiped (by a limiter without the penalty, on the same key), so only the block stands between the next
 * round and 5 more admissions: that round admits none. Once the block has ended, a round admits 5 again
 * and its first refusal starts a longer block (the repeat offence, x2); `reset` lifts it and the next round
 * admits exactly 5. Without the penalty the second round would admit 5 (checked: the plain limiter's peek).
 */
import { join } from 'node:path'
import { at, type RaceHandle, redisUrl, sleepAtLeast, startRace } from '@tollgate/testkit'
import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import { RateLimiter, RedisStore } from '../src'
import { nodeRedis } from './clients'
import { penaltyPolicy } from './fixtures/penalty-race-module'

const MODULE = join(__dirname, 'fixtures/penalty-race-module.ts')

describe.each(['node-redis', 'ioredis'] as const)('penalties across processes (%s)', (client) => {
  let race: RaceHandle
  let close: () => Promise<unknown>
  let store: RedisStore
  // The limiter without the penalty stands for another process: a client and store of its own, since
  // the stores over one client refuse two limiters with different policies under one prefix.
  let plainStore: RedisStore
  beforeAll(async () => {
    race = await startRace({ workers: 4, module: MODULE, setupArgs: { url: redisUrl(), client } })
    const c = await nodeRedis()
    const p = await nodeRedis()
    store = new RedisStore(c)
    plainStore = new RedisStore(p)
    close = () => Promise.all([c.quit(), p.quit()])
  })
  afterAll(async () => {
    await race?.close()
    await close?.()
  })

  it.each(ALL_ALGORITHMS)(
    '%s: no admission during a block, a longer block for a repeat offence, reset lifts it',
    async (algorithm) => {
      const prefix = uniquePrefix(`pen-race-${algorithm}`)
      const { penalty, ...plainPolicy } = penaltyPolicy(algorithm)
      const judge = new RateLimiter({ store, prefix, denyCache: false, ...penaltyPolicy(algorithm) })
      const plain = new RateLimiter({ store: plainStore, prefix, denyCache: false, ...plainPolicy })
      const round = async () => {
        const r = await race.round({ prefix, algorithm }, 50)
        expect(r.errorSamples).toEqual([])
        return r.admitted
      }

      expect(await round()).toBe(5)
      // Wipe the policy's own state (a limiter without the penalty, same key): the policy alone would now
      // admit 5, and the penalised limiter's numbers are the block's alone.
      await plain.reset('hot-key')
      expect(await plain.peek('hot-key')).toMatchObject({ allowed: true, remaining: 5 })
      const first = await judge.peek('hot-key')
      expect(at(first.policies, 0).blocked).toBe(true)
      expect(first.retryAfterMs).toBeLessThanOrEqual(penalty.block)

      const during = await round()
      // The first block still stood when the round ended (not a new, longer one), so every refusal of the
      // round was that block's.
      const after = await judge.peek('hot-key')
      expect(at(after.policies, 0).blocked).toBe(true)
      expect(after.retryAfterMs).toBeLessThanOrEqual(first.retryAfterMs)
      expect(during).toBe(0)

      await sleepAtLeast(after.retryAfterMs)
      expect(await round()).toBe(5)
      await plain.reset('hot-key')
      const repeat = await judge.peek('hot-key')
      expect(at(repeat.policies, 0).blocked).toBe(true)
      expect(repeat.retryAfterMs).toBeGreaterThan(penalty.block) // the repeat offence: x2, up to 3000 ms
      expect(repeat.retryAfterMs).toBeLessThanOrEqual(2 * penalty.block)

      await judge.reset('hot-key')
      expect(await round()).toBe(5)
      console.log(`penalty race ${client} ${algorithm}: 5, 0 during the block, 5, 5 after reset`)
    },
  )
})
