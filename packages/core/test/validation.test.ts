/** Bad options throw ConfigError at construction, bad inputs throw InputError per call: zero store commands. */

import { at } from '@tollgate/testkit/checked'
import { ConfigError, InputError, RateLimiter, RedisStore } from '../src'
import type { ScriptClient } from '../src/entries/scripts'
import { nodeRedis } from './clients'

describe('validation before any Redis command', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let calls = 0
  let store: RedisStore
  beforeAll(async () => {
    client = await nodeRedis()
    const seam: ScriptClient = {
      evalsha: (sha, keys, args) => {
        calls++
        return client.evalSha(sha, { keys, arguments: args })
      },
      eval: (source, keys, args) => {
        calls++
        return client.eval(source, { keys, arguments: args })
      },
    }
    store = new RedisStore(seam)
  })
  afterAll(async () => {
    await client.quit()
  })
  beforeEach(() => {
    calls = 0
  })
  afterEach(() => {
    expect(calls).toBe(0)
  })

  const bad: [string, Record<string, unknown>, RegExp][] = [
    ['limit 0', { limit: 0, window: '1m' }, /^limit must be .*received 0$/],
    ['limit negative', { limit: -1, window: '1m' }, /^limit .*received -1$/],
    ['limit fractional', { limit: 1.5, window: '1m' }, /^limit .*received 1\.5$/],
    ['limit NaN', { limit: Number.NaN, window: '1m' }, /^limit .*received NaN$/],
    ['limit Infinity', { limit: Number.POSITIVE_INFINITY, window: '1m' }, /^limit .*received Infinity$/],
    ['limit string', { limit: '10', window: '1m' }, /^limit .*received "10"$/],
    ['limit missing', { window: '1m' }, /^limit .*received undefined$/],
    ['window 0', { limit: 1, window: 0 }, /^window .*received 0$/],
    ['window negative', { limit: 1, window: -5 }, /^window .*received -5$/],
    ['window unparseable', { limit: 1, window: '1 minute' }, /^window .*received "1 minute"$/],
    ['window fractional', { limit: 1, window: 1.5 }, /^window .*received 1\.5$/],
    ['window fractional ms string', { limit: 1, window: '1.5ms' }, /^window .*received "1\.5ms"$/],
    ['window sub-ms decimal', { limit: 1, window: '0.0001s' }, /^window .*received "0\.0001s"$/],
    ['window beyond a year', { limit: 1, window: '400d' }, /^window .*received "400d"$/],
    ['window missing', { limit: 1 }, /^window .*received undefined$/],
    [
      'unknown option windowMs',
      { limit: 1, windowMs: 1000 },
      /^windowMs must be a known option \(did you mean window, /,
    ],
    [
      'unknown option max',
      { max: 1, window: 1000 },
      /^max must be a known option \(did you mean limit\?\), received 1$/,
    ],
    [
      'unknown algorithm',
      { limit: 1, window: '1s', algorithm: 'leaky' },
      /^algorithm must be one of .*received "leaky"$/,
    ],
    ['burst on a window algorithm', { limit: 1, window: '1s', burst: 3 }, /^burst must be unset unless/],
    [
      'burst fractional',
      { limit: 1, window: '1s', algorithm: 'gcra', burst: 2.5 },
      /^burst .*received 2\.5$/,
    ],
    ['empty prefix', { limit: 1, window: '1s', prefix: '' }, /^prefix .*received ""$/],
    ['prefix with a brace', { limit: 1, window: '1s', prefix: 'a{b' }, /^prefix .*received "a\{b"$/],
    [
      'sliding-log limit too large for a log',
      { limit: 1_000_000, window: '1s', algorithm: 'sliding-log' },
      /^limit .*received 1000000$/,
    ],
    [
      'limit x window beyond exact integers',
      { limit: 1_000_000_000, window: '365d' },
      /^limit .*received 1000000000$/,
    ],
    [
      'policies with inline limit',
      { limit: 1, policies: { a: { limit: 1, window: '1s' } } },
      /^policies must be given alone/,
    ],
    ['empty policies', { policies: {} }, /^policies must be a non-empty object/],
    ['bad policy name', { policies: { 'a b': { limit: 1, window: '1s' } } }, /^policies\.a b must be a name/],
    [
      'bad nested policy option',
      { policies: { ip: { limit: 1, window: '1s', windowMs: 5 } } },
      /^policies\.ip\.windowMs must be a known option/,
    ],
    [
      'bad nested policy window',
      { policies: { ip: { limit: 1, window: 'soon' } } },
      /^policies\.ip\.window .*received "soon"$/,
    ],
    [
      'denyCache.maxMs 0',
      { limit: 1, window: '1s', denyCache: { maxMs: 0 } },
      /^denyCache\.maxMs .*received 0$/,
    ],
    [
      'denyCache.maxBytes fractional',
      { limit: 1, window: '1s', denyCache: { maxBytes: 1.5 } },
      /^denyCache\.maxBytes .*received 1\.5$/,
    ],
    [
      'localCapacity.maxKeys 0',
      { limit: 1, window: '1s', localCapacity: { maxKeys: 0 } },
      /^localCapacity\.maxKeys .*received 0$/,
    ],
    [
      'localCapacity.maxBytes string',
      { limit: 1, window: '1s', localCapacity: { maxBytes: '4mb' } },
      /^localCapacity\.maxBytes .*received "4mb"$/,
    ],
    [
      'localCapacity unknown option',
      { limit: 1, window: '1s', localCapacity: { max: 5 } },
      /^localCapacity\.max must be a known option/,
    ],
  ]

  it.each(bad)('%s', (_name, options, message) => {
    let error: unknown
    try {
      new RateLimiter({ store, ...options } as never)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).code).toBe('ERR_TOLLGATE_CONFIG')
    expect((error as Error).message).toMatch(message)
  })

  it.each([
    ['1.5s', 1500],
    ['1.1s', 1100],
    ['0.25h', 900_000],
    ['2.5m', 150_000],
    ['0.001s', 1],
  ])('a decimal window %s is %d ms (the Duration type admits it)', (window, ms) => {
    // a prefix each: limiters with other policies on one store and prefix are refused
    const limiter = new RateLimiter({ store, prefix: `decimal-${ms}`, limit: 1, window: window as '1s' })
    expect(at(limiter.policies, 0).windowMs).toBe(ms)
  })

  it('no store', () => {
    expect(() => new RateLimiter({ limit: 1, window: '1s' } as never)).toThrow(/^store must be a Store/)
  })

  it('a store client of the wrong kind', () => {
    expect(() => new RedisStore({ get: () => 1 })).toThrow(ConfigError)
  })

  const limiter = () =>
    new RateLimiter({
      store,
      prefix: 'inputs',
      policies: { ip: { limit: 5, window: '1m' }, account: { limit: 5, window: '1m' } },
    })
  const badInputs: [string, () => Promise<unknown>, RegExp][] = [
    ['empty key', () => limiter().consume(''), /^key must be a non-empty string/],
    ['non-string key', () => limiter().consume(42 as never), /^key must be a string or a record/],
    [
      'empty policy key',
      () => limiter().consume({ ip: '', account: 'a' }),
      /^key\.ip must be a non-empty string/,
    ],
    [
      'missing policy key',
      () => limiter().consume({ ip: '1' } as never),
      /^key\.account must be a non-empty string/,
    ],
    [
      'unknown policy key',
      () => limiter().consume({ ip: '1', account: 'a', zz: 'x' }),
      /^key\.zz must be a policy name/,
    ],
    ['cost NaN', () => limiter().consume('k', { cost: Number.NaN }), /^cost .*received NaN$/],
    ['cost negative', () => limiter().consume('k', { cost: -1 }), /^cost .*received -1$/],
    ['cost fractional', () => limiter().consume('k', { cost: 0.5 }), /^cost .*received 0\.5$/],
    ['cost unsafe', () => limiter().consume('k', { cost: 2 ** 60 }), /^cost .*received/],
    ['cost string', () => limiter().consume('k', { cost: '1' as never }), /^cost .*received "1"$/],
    ['peek with bad cost', () => limiter().peek('k', { cost: -2 }), /^cost /],
    ['reset with empty key', () => limiter().reset(''), /^key must be a non-empty string/],
  ]

  it.each(badInputs)('%s', async (_name, call, message) => {
    await expect(call()).rejects.toThrow(InputError)
    await expect(call()).rejects.toThrow(message)
  })
})
