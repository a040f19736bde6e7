/**
 * A full MemoryStore (the `'local'` fallback's store) stays strict: it never forgets a live counter to
 * make room; it reclaims expired keys, and otherwise refuses what it cannot hold until a held key
 * expires. Its byte charge never passes `maxBytes`. A controlled clock: no sleeping.
 */
import { ConfigError, MemoryStore, RateLimiter } from '../index'

const T0 = 1_700_000_000_000_000 // us

function setup(options: { maxKeys?: number; maxBytes?: number }, policy: Record<string, unknown>) {
  let now = T0
  const store = new MemoryStore({ ...options, clock: () => now })
  const limiter = new RateLimiter({ store, denyCache: false, ...policy } as never)
  return { store, limiter, advanceMs: (ms: number) => (now += ms * 1000) }
}

describe('MemoryStore when full', () => {
  it('refuses a new key until a held one expires, and never forgets a live counter', async () => {
    const { store, limiter, advanceMs } = setup(
      { maxKeys: 10 },
      { limit: 5, window: '1s', algorithm: 'fixed-window' },
    )
    for (let i = 0; i < 5; i++) expect((await limiter.consume('victim')).allowed).toBe(true)
    let flood = 0
    for (let i = 0; i < 1000; i++) if ((await limiter.consume(`fresh-${i}`)).allowed) flood++
    expect(flood).toBe(9)
    expect(store.size).toBe(10)
    const refused = await limiter.consume('fresh-again')
    expect(refused).toMatchObject({ allowed: false, remaining: 0 })
    expect(refused.retryAfterMs).toBeGreaterThan(0)
    // Redis keeps a key through the millisecond it expires at: the window's end + 1 ms.
    expect(refused.retryAfterMs).toBeLessThanOrEqual(1001)
    expect((await limiter.consume('victim')).allowed).toBe(false)
    // Once the held keys expire, they are reclaimed and the new key fits.
    advanceMs(refused.retryAfterMs)
    expect((await limiter.consume('fresh-again')).allowed).toBe(true)
    expect((await limiter.peek('victim')).remaining).toBe(5)
  })

  it('peek agrees with consume on a key that does not fit', async () => {
    const { limiter } = setup({ maxKeys: 1 }, { limit: 5, window: '1m' })
    await limiter.consume('a')
    expect((await limiter.peek('b')).allowed).toBe(false)
    expect((await limiter.consume('b')).allowed).toBe(false)
    expect((await limiter.peek('a')).allowed).toBe(true)
  })

  it('charges bytes by key length and log length, and never passes maxBytes', async () => {
    const maxBytes = 8 * 1024
    const { store, limiter } = setup({ maxBytes }, { limit: 200, window: '1m', algorithm: 'sliding-log' })
    let admitted = 0
    for (let i = 0; i < 800; i++) {
      if ((await limiter.consume(`user-${i % 4}`, { cost: 1 })).allowed) admitted++
      expect(store.bytes).toBeLessThanOrEqual(maxBytes)
    }
    // Four growing logs fill the budget; past it, growth is refused rather than a counter forgotten.
    expect(admitted).toBeGreaterThan(4)
    expect(admitted).toBeLessThan(800)
    expect(store.size).toBe(4)
    const longKeys = new MemoryStore({ maxBytes })
    const lim = new RateLimiter({ store: longKeys, prefix: 'p'.repeat(64), limit: 5, window: '1m' })
    for (let i = 0; i < 200; i++) await lim.consume(`${i}`.padEnd(120, 'x'))
    expect(longKeys.bytes).toBeLessThanOrEqual(maxBytes)
    expect(longKeys.size).toBeLessThan(200)
  })

  it('rejects a bad maxBytes', () => {
    expect(() => new MemoryStore({ maxBytes: 0 })).toThrow(ConfigError)
    expect(() => new MemoryStore({ maxBytes: 0 })).toThrow(
      /^maxBytes must be a positive integer, received 0$/,
    )
  })
})
