/**
 * Per-call options are checked like the constructor's: an unknown name is an InputError naming it, with
 * the name it likely meant, a value of the wrong type is one too, and neither reaches the store (no
 * command, nothing charged) on any method, on Redis and on the MemoryStore.
 */

import { nodeRedis } from '../../test/clients'
import type { ScriptClient } from '../entries/scripts'
import {
  ConfigError,
  type Decision,
  InputError,
  MemoryStore,
  RateLimitError,
  RateLimiter,
  RedisStore,
  type Store,
} from '../index'

type Client = Awaited<ReturnType<typeof nodeRedis>>

/** Each mistake, the call making it, and the whole message it must get. */
const MISTAKES: [string, (l: RateLimiter) => unknown, string, string][] = [
  [
    'consume: a slip of one letter',
    (l) => l.consume('u', { cots: 2 } as never),
    'cots',
    "cots must be a known option (did you mean 'cost'?), received 2",
  ],
  [
    'consume: a slip of case',
    (l) => l.consume('u', { Cost: 2 } as never),
    'Cost',
    "Cost must be a known option (did you mean 'cost'?), received 2",
  ],
  [
    "consume: rate-limiter-flexible's points",
    (l) => l.consume('u', { points: 2 } as never),
    'points',
    "points must be a known option (did you mean 'cost'?), received 2",
  ],
  [
    'consume: limit for limits',
    (l) => l.consume('u', { limit: 5 } as never),
    'limit',
    "limit must be a known option (did you mean 'limits'?), received 5",
  ],
  [
    'consume: a name far from any',
    (l) => l.consume('u', { priority: 'high' } as never),
    'priority',
    `priority must be a known option ('cost', 'onStoreError', 'shadow', 'limits'), received "high"`,
  ],
  [
    'consume: shadow not a boolean',
    (l) => l.consume('u', { shadow: 'yes' } as never),
    'shadow',
    'shadow must be true or false, received "yes"',
  ],
  [
    'consume: onStoreError misspelt',
    (l) => l.consume('u', { onStoreError: 'alow' } as never),
    'onStoreError',
    `onStoreError must be one of 'allow', 'deny', 'local', received "alow"`,
  ],
  [
    'consume: options not an object',
    (l) => l.consume('u', 2 as never),
    'options',
    'options must be an object, received 2',
  ],
  [
    'peek: a slip of one letter',
    (l) => l.peek('u', { cots: 2 } as never),
    'cots',
    "cots must be a known option (did you mean 'cost'?), received 2",
  ],
  [
    'peek: onStoreError of the wrong type',
    (l) => l.peek('u', { onStoreError: true } as never),
    'onStoreError',
    `onStoreError must be one of 'allow', 'deny', 'local', received true`,
  ],
  [
    'attempt: a slip of one letter',
    (l) => l.attempt('u', () => 'ran', { cots: 2 } as never),
    'cots',
    "cots must be a known option (did you mean 'cost'?), received 2",
  ],
  [
    'attempt: options where the callback goes',
    (l) => l.attempt('u', { cost: 2 } as never),
    'fn',
    'fn must be a function of the attempt, received an object with keys cost',
  ],
  [
    'wait: a slip in a call option',
    (l) => l.wait('u', { cots: 2 } as never),
    'cots',
    "cots must be a known option (did you mean 'cost'?), received 2",
  ],
  [
    'wait: a slip in its own option',
    (l) => l.wait('u', { maxWaitMS: 10 } as never),
    'maxWaitMS',
    "maxWaitMS must be a known option (did you mean 'maxWaitMs'?), received 10",
  ],
  [
    'wait: a signal that is not one',
    (l) => l.wait('u', { signal: { aborted: false } } as never),
    'signal',
    'signal must be an AbortSignal, received an object with keys aborted',
  ],
  [
    'reset: options it does not take',
    (l) => (l.reset as (key: string, options: unknown) => Promise<void>)('u', { policy: 'default' }),
    'policy',
    'policy must be a known option (reset() takes no options), received "default"',
  ],
  [
    'keysFor: options it does not take',
    async (l) => (l.keysFor as (key: string, options: unknown) => string[])('u', { cots: 1 }),
    'cots',
    'cots must be a known option (keysFor() takes no options), received 1',
  ],
]

/** The store under test, and how many commands reached Redis (0 for the MemoryStore). */
type Fixture = { store: Store; commands(): number; close(): Promise<void> }

const FIXTURES: [string, () => Promise<Fixture>][] = [
  [
    'RedisStore',
    async () => {
      const client: Client = await nodeRedis()
      let commands = 0
      const seam: ScriptClient = {
        evalsha: (sha, keys, args) => {
          commands++
          return client.evalSha(sha, { keys, arguments: args })
        },
        eval: (source, keys, args) => {
          commands++
          return client.eval(source, { keys, arguments: args })
        },
      }
      return {
        store: new RedisStore(seam),
        commands: () => commands,
        close: async () => void (await client.quit()),
      }
    },
  ],
  ['MemoryStore', async () => ({ store: new MemoryStore(), commands: () => 0, close: async () => {} })],
]

describe.each(FIXTURES)('per-call options on the %s', (_name, make) => {
  let fixture: Fixture
  let prefix = ''
  let run = 0
  beforeAll(async () => {
    fixture = await make()
  })
  afterAll(() => fixture.close())
  // A day-long window: nothing a test spends can expire before it reads it back.
  const limiter = () => new RateLimiter({ store: fixture.store, prefix, limit: 10, window: '1d' })
  beforeEach(() => {
    prefix = `call-options-${process.pid}-${Date.now()}-${run++}`
  })

  it.each(MISTAKES)(
    '%s: InputError before the store, nothing charged',
    async (_case, call, name, message) => {
      const l = limiter()
      const before = fixture.commands()
      let thrown: unknown
      try {
        await call(l)
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(InputError)
      const error = thrown as InputError
      expect(error.code).toBe('ERR_TOLLGATE_INPUT')
      expect(error.argument).toBe(name)
      expect(error.message).toBe(message)
      expect(fixture.commands()).toBe(before)
      expect((await l.peek('u')).remaining).toBe(10)
    },
  )

  it('known options still work: cost, shadow, onStoreError and limits in one call', async () => {
    const l = limiter()
    const d = await l.consume('u', { cost: 2, shadow: false, onStoreError: 'deny', limits: 20 })
    expect(d.allowed).toBe(true)
    expect(d.remaining).toBe(18)
    await expect(l.consume('u', {})).resolves.toMatchObject({ remaining: 7 })
    await expect(
      (l.reset as (key: string, options: unknown) => Promise<void>)('u', {}),
    ).resolves.toBeUndefined()
    expect((await l.peek('u')).remaining).toBe(10)
  })

  it('refund: a mistake is refused before anything is given back, even on a refused decision', async () => {
    const l = limiter()
    const spent = await l.consume('u', { cost: 3 })
    await expect(l.refund(spent, { cots: 3 } as never)).rejects.toThrow(
      "cots must be a known option (did you mean 'cost'?), received 3",
    )
    expect((await l.peek('u')).remaining).toBe(7)
    const refused = { ...spent, allowed: false }
    await expect(l.refund(refused, { cots: 3 } as never)).rejects.toThrow(InputError)
    // the options of the spend may be passed again: only cost is read
    await l.refund(spent, { cost: 3, shadow: false, limits: 10 })
    expect((await l.peek('u')).remaining).toBe(10)
  })

  it('release: options it does not take are refused', async () => {
    const jobs = new RateLimiter({ store: fixture.store, prefix, concurrency: 2, lease: '1d' })
    const d: Decision = await jobs.consume('u')
    await expect(
      (jobs.release as (d: Decision, options: unknown) => Promise<void>)(d, { force: true }),
    ).rejects.toThrow('force must be a known option (release() takes no options), received true')
    expect((await jobs.peek('u')).remaining).toBe(1)
    await jobs.release(d)
    expect((await jobs.peek('u')).remaining).toBe(2)
  })

  it('a bad per-call onStoreError is refused even when the store is down and the policy is allow', async () => {
    const down: Store = {
      consume: () => Promise.reject(new Error('connection refused')),
      peek: () => Promise.reject(new Error('connection refused')),
      refund: () => Promise.reject(new Error('connection refused')),
      reset: () => Promise.reject(new Error('connection refused')),
    }
    const l = new RateLimiter({ store: down, limit: 1, window: '1d', onStoreError: 'allow' })
    await expect(l.consume('u', { onStoreError: 'allow ' } as never)).rejects.toThrow(InputError)
    await expect(l.consume('u', { cots: 1 } as never)).rejects.toThrow(InputError)
    // the same limiter does fail open on a well-formed call: the errors above are not the outage's
    await expect(l.consume('u')).resolves.toMatchObject({ allowed: true, source: 'fallback' })
  })
})

describe('messages stay bounded whatever the value', () => {
  const store = new MemoryStore()
  const limiter = new RateLimiter({ store, limit: 1, window: '1d' })
  const huge = 'x'.repeat(1_000_000)
  const wide = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, huge]))
  const cases: [string, () => unknown][] = [
    ['a huge string value', () => limiter.consume('u', { cost: huge } as never)],
    ['a huge option name', () => limiter.consume('u', { [huge]: 1 } as never)],
    ['an object of 10,000 keys', () => limiter.consume('u', { shadow: wide } as never)],
    ['a huge array', () => limiter.consume('u', { cost: new Array(1_000_000).fill(huge) } as never)],
    ['a huge bigint', () => limiter.consume('u', { cost: 10n ** 5000n } as never)],
    ['a huge key record', () => limiter.consume(wide)],
    ['a limiter option', () => new RateLimiter({ store, limit: 1, window: '1d', name: huge })],
    ['a store option', () => new RateLimiter({ store: wide as never, limit: 1, window: '1d' })],
    ['a limiter as a key', () => limiter.consume(limiter as never)],
  ]
  it.each(cases)('%s', async (_name, call) => {
    let thrown: unknown
    try {
      await call()
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(Error)
    expect((thrown as Error).message.length).toBeLessThanOrEqual(300)
  })

  it('describes a value by its class, its keys or its length', () => {
    const received = (value: unknown) => {
      try {
        new RateLimiter({ store, limit: 1, window: '1d', timeoutMs: value as number })
      } catch (error) {
        return (error as ConfigError).message.replace(/^.* received /, '')
      }
      throw new Error('accepted')
    }
    expect(received(limiter)).toBe('a RateLimiter')
    expect(received(new AbortController().signal)).toBe('an AbortSignal')
    expect(received({ a: 1, b: 2, c: 3, d: 4, e: 5, f: 6 })).toBe('an object with keys a, b, c, d, e…')
    expect(received({})).toBe('an empty object')
    expect(received([1, 2, 3])).toBe('an array of 3 items')
    expect(received(Object.create(null))).toBe('an empty object')
    expect(received(huge)).toBe(`"${'x'.repeat(97)}…"`)
    expect(received('a\nb')).toBe('"a\\nb"')
    expect(received('\n'.repeat(200))).toBe(`"${'\\n'.repeat(48)}…"`)
  })
})

describe('instanceof across builds', () => {
  // What the other build's objects look like from here: another class, the same registered brand.
  const other = (name: string) => {
    class Foreign {}
    Object.defineProperty(Foreign.prototype, Symbol.for('tollgate.brand/1'), { value: name })
    return new Foreign()
  }
  it('recognises a limiter, a store or an error of the other build by its brand', () => {
    expect(other('RateLimiter')).toBeInstanceOf(RateLimiter)
    expect(other('MemoryStore')).toBeInstanceOf(MemoryStore)
    expect(other('RedisStore')).toBeInstanceOf(RedisStore)
    expect(other('InputError')).toBeInstanceOf(InputError)
    expect(other('RateLimiter')).not.toBeInstanceOf(MemoryStore)
    expect(other('ConfigError')).not.toBeInstanceOf(InputError)
    expect({}).not.toBeInstanceOf(RateLimiter)
  })
  it('keeps the hierarchy: an error of either build is a RateLimitError, a subclass stays itself', () => {
    class Foreign extends Error {}
    Object.defineProperty(Foreign.prototype, Symbol.for('tollgate.brand/1'), { value: 'RateLimitError' })
    class ForeignInput extends Foreign {}
    Object.defineProperty(ForeignInput.prototype, Symbol.for('tollgate.brand/1'), { value: 'InputError' })
    expect(new ForeignInput()).toBeInstanceOf(InputError)
    expect(new ForeignInput()).toBeInstanceOf(RateLimitError)
    expect(new ForeignInput()).not.toBeInstanceOf(ConfigError)
    class Mine extends InputError {}
    expect(new InputError('k', 'x', 1)).not.toBeInstanceOf(Mine)
    expect(new Mine('k', 'x', 1)).toBeInstanceOf(InputError)
  })
})
