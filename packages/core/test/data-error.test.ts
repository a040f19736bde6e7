/**
 * An error about one key's data (a script that fails on what one key holds) is not an outage: it must not
 * open the limiter-wide circuit breaker, which would hand every identity to the failure policy (under
 * `'allow'`, an identity already at its limit admitted without a count), and it must not admit the
 * faulty key uncounted either.
 *
 * The errors are real Redis errors from the test's redis-server: a ScriptClient forwards every call to a
 * real client, except that calls for the poisoned identity run a script that fails on that key's data
 * (a Lua runtime error, or WRONGTYPE from a command inside the script). Whatever the shipped scripts
 * repair today, these stay per-key data errors.
 */
import { redisUrl } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import Redis from 'ioredis'
import { createClient } from 'redis'
import { RateLimiter, RedisStore, type TollgateEvent } from '../src'
import type { ScriptClient } from '../src/entries/scripts'
import { storeFaultOf } from '../src/store-fault'

const POISON = 'poisoned'

/** Scripts that fail on the data of their first key, each a real error from the server. */
const FAULTY = {
  // "ERR user_script:1: attempt to perform arithmetic on a nil value ..."
  'Lua runtime error': "local ts = redis.call('HGET', KEYS[1], 'ts') return ts + 1",
  // "WRONGTYPE Operation against a key holding the wrong kind of value script: ..., on @user_script:1."
  'WRONGTYPE inside the script': "redis.call('HSET', KEYS[1], 'tk', 'x') return redis.call('INCR', KEYS[1])",
} as const

interface Real {
  run: ScriptClient
  close(): Promise<unknown>
}

async function real(kind: 'node-redis' | 'ioredis'): Promise<Real> {
  if (kind === 'ioredis') {
    const c = new Redis(redisUrl())
    await c.ping()
    return {
      run: {
        evalsha: (sha, keys, args) => c.evalsha(sha, keys.length, ...keys, ...args),
        eval: (source, keys, args) => c.eval(source, keys.length, ...keys, ...args),
      },
      close: async () => c.disconnect(),
    }
  }
  const c = createClient({ url: redisUrl() })
  c.on('error', () => {})
  await c.connect()
  return {
    run: {
      evalsha: (sha, keys, args) => c.evalSha(sha, { keys, arguments: args }),
      eval: (source, keys, args) => c.eval(source, { keys, arguments: args }),
    },
    close: () => c.quit(),
  }
}

/** Forwards to the real client; calls on the poisoned identity's keys run `faulty` instead. */
function poisoning(inner: ScriptClient, faulty: string): ScriptClient {
  const poisoned = (keys: string[]) => keys.some((k) => k.includes(`{${POISON}}`))
  return {
    evalsha: (sha, keys, args) =>
      poisoned(keys) ? inner.eval(faulty, keys, []) : inner.evalsha(sha, keys, args),
    eval: (source, keys, args) =>
      poisoned(keys) ? inner.eval(faulty, keys, []) : inner.eval(source, keys, args),
  }
}

describe.each(['node-redis', 'ioredis'] as const)('a per-key data error (%s)', (kind) => {
  let client: Real
  beforeAll(async () => {
    client = await real(kind)
  })
  afterAll(async () => {
    await client?.close()
  })

  it.each(Object.keys(FAULTY) as (keyof typeof FAULTY)[])(
    '%s: never opens the breaker; an honest identity at its limit stays refused; the faulty key is counted',
    async (label) => {
      const events: TollgateEvent[] = []
      const limiter = new RateLimiter({
        store: new RedisStore(poisoning(client.run, FAULTY[label])),
        prefix: uniquePrefix('data-error'),
        limit: 5,
        // A day: a minute boundary during the test would let the sliding window weigh the 5 spends below 5.
        window: '1d',
        onStoreError: 'allow',
        // Every refusal goes to the store: the deny cache must not be what keeps the honest identity out.
        denyCache: false,
        onEvent: (e) => events.push(e),
      })
      for (let i = 0; i < 5; i++) expect((await limiter.consume('honest')).allowed).toBe(true)

      let poisonAdmitted = 0
      for (let i = 0; i < 200; i++) if ((await limiter.consume(POISON)).allowed) poisonAdmitted++
      let honestAdmitted = 0
      let honestFromStore = 0
      for (let i = 0; i < 200; i++) {
        const d = await limiter.consume('honest')
        if (d.allowed) honestAdmitted++
        if (d.source === 'store') honestFromStore++
      }
      const errors = events.filter((e) => e.type === 'store-error')
      console.log(
        `[data-error] ${kind} ${label}: breaker ${limiter.breaker.state}, honest admitted ${honestAdmitted}/200 ` +
          `after 200 faulty calls (${poisonAdmitted} of them admitted), ${errors.length} store-error events`,
      )
      expect(limiter.breaker.state).toBe('closed')
      expect(events.filter((e) => e.type === 'breaker')).toEqual([])
      expect(honestAdmitted).toBe(0)
      expect(honestFromStore).toBe(200)
      // Not silent, and not uncounted: every faulty call is reported, and decided by the local fallback.
      expect(errors).toHaveLength(200)
      expect(storeFaultOf((errors[0] as { error: unknown }).error)).toBe('data')
      expect(poisonAdmitted).toBe(5)
    },
  )
})

describe('storeFaultOf', () => {
  it.each([
    ['ERR user_script:1: attempt to compare nil with number script: 9051d9, on @user_script:1.', 'data'],
    [
      'WRONGTYPE Operation against a key holding the wrong kind of value script: 6163, on @user_script:1.',
      'data',
    ],
    ['ERR value is not an integer or out of range script: 3218d0, on @user_script:1.', 'data'],
    ['ERR Error running script (call to f_abc): @user_script:1: user_script:1: attempt to compare', 'data'],
    ['Command failed: ERR user_script:3: attempt to perform arithmetic on a nil value', 'data'],
    ["OOM command not allowed when used memory > 'maxmemory'. script: 1a2b, on @user_script:1.", 'store'],
    ["OOM command not allowed when used memory > 'maxmemory'.", 'store'],
    ['ERR Error running script (call to f_abc): @user_script:1: -OOM command not allowed', 'store'],
    ['BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.', 'store'],
    ['LOADING Redis is loading the dataset in memory', 'store'],
    ['MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no.', 'store'],
    ['CLUSTERDOWN The cluster is down', 'store'],
    ['TRYAGAIN Multiple keys request during rehashing of slot', 'store'],
    ["READONLY You can't write against a read only replica. script: 1a2b, on @user_script:1.", 'store'],
    ['NOREPLICAS Not enough good replicas to write.', 'store'],
    ['Socket closed unexpectedly', 'store'],
    ['connect ECONNREFUSED 127.0.0.1:6390', 'store'],
    ['Connection is closed.', 'store'],
    ['consume: the client is reconnecting (not queued)', 'store'],
    ['fetch failed', 'store'],
  ] as const)('%s → %s', (message, fault) => {
    expect(storeFaultOf(new Error(message))).toBe(fault)
  })
})
