import { createHash } from 'node:crypto'
import fc from 'fast-check'
import { ALGORITHMS, buildKey, identityTag, keySignature, MAX_IDENTITY_BYTES } from './entries/scripts'
import { base64, sha256 } from './hash'
import { keyPattern, parseKey, RateLimiter, type RateLimiterOptions } from './index'
import type { CallKeys } from './keys'
import { MemoryStore } from './stores/memory-store'
import type { Algorithm } from './types'

describe('keys', () => {
  it('puts the identity in one hash tag, then the policy name and what its state means', () => {
    expect(buildKey('login', 'ip:1.2.3.4', 'fw-15m', 'ip')).toBe('login:{ip:1.2.3.4}:ip:fw-15m')
    expect(buildKey('tollgate', '1.2.3.4', 'sw-1m')).toBe('tollgate:{1.2.3.4}:sw-1m')
  })

  it.each([
    ['fixed-window', 900_000, 'fw-15m'],
    ['sliding-window', 60_000, 'sw-1m'],
    ['sliding-log', 10_000, 'sl-10s'],
    ['token-bucket', 3_600_000, 'tb-1h'],
    ['gcra', 86_400_000, 'gc-1d'],
    ['concurrency', 30_000, 'cc-30s'],
    ['gcra', 1500, 'gc-1500ms'],
    ['fixed-window', 90 * 60_000, 'fw-90m'],
    ['fixed-window', 172_800_000, 'fw-2d'],
    ['fixed-window', 1, 'fw-1ms'],
  ] as [Algorithm, number, string][])('signs %s over %d ms as %s', (algorithm, windowMs, sig) => {
    expect(keySignature(algorithm, windowMs)).toBe(sig)
  })

  it('gives every limiter its signature: algorithm and window, never the limit', () => {
    const keysOf = (options: Omit<RateLimiterOptions, 'store'>) => {
      const l = new RateLimiter({
        ...options,
        store: new MemoryStore(),
      } as RateLimiterOptions) as unknown as {
        keys: CallKeys
      }
      return l.keys.entries('1.2.3.4').map((e) => e.key)
    }
    expect(keysOf({ limit: 100, window: '1m' })).toEqual(['tollgate:{1.2.3.4}:sw-1m'])
    expect(keysOf({ limit: 3, window: '1h' })).toEqual(['tollgate:{1.2.3.4}:sw-1h'])
    expect(keysOf({ limit: 5, window: '1h' })).toEqual(['tollgate:{1.2.3.4}:sw-1h'])
    expect(keysOf({ limit: 3, window: '1h', algorithm: 'fixed-window' })).toEqual([
      'tollgate:{1.2.3.4}:fw-1h',
    ])
    expect(keysOf({ concurrency: 2, lease: '30s' } as never)).toEqual(['tollgate:{1.2.3.4}:cc-30s'])
    expect(
      keysOf({
        prefix: 'login',
        policies: {
          ip: { limit: 100, window: '15m' },
          account: { limit: 10, window: '15m', algorithm: 'gcra' },
        },
      }),
    ).toEqual(['login:{1.2.3.4}:ip:sw-15m', 'login:{1.2.3.4}:account:gc-15m'])
  })

  it('parses every key it builds, for every algorithm, and nothing else', () => {
    for (const algorithm of [...ALGORITHMS, 'concurrency'] as Algorithm[]) {
      for (const windowMs of [1, 999, 1000, 1500, 60_000, 3_600_000, 86_400_000, 7 * 86_400_000]) {
        const sig = keySignature(algorithm, windowMs)
        expect(parseKey(buildKey('tollgate', '1.2.3.4', sig))).toEqual({
          prefix: 'tollgate',
          tag: '1.2.3.4',
          algorithm,
          windowMs,
        })
        expect(parseKey(buildKey('a:b', 'ip:1.2.3.4', sig, 'ip'))).toEqual({
          prefix: 'a:b',
          tag: 'ip:1.2.3.4',
          policy: 'ip',
          algorithm,
          windowMs,
        })
      }
    }
    const hashed = buildKey('p', 'a}{b', 'sw-1m', 'q')
    expect(parseKey(hashed)).toEqual({
      prefix: 'p',
      tag: identityTag('a}{b'),
      policy: 'q',
      algorithm: 'sliding-window',
      windowMs: 60_000,
    })
    for (const other of [
      'tollgate:{1.2.3.4}', // the old single-policy layout
      'tollgate:{1.2.3.4}:default', // its old name
      'login:{ip:1.2.3.4}:ip', // an old named-policy key
      'tollgate:{1.2.3.4}:sw-1m!p', // a penalty
      'tollgate:{1.2.3.4}:sw-1m!abc123', // a refund marker
      'tollgate:{1.2.3.4}:sw-60s', // not the shortest form
      'tollgate:{1.2.3.4}:xx-1m',
      'tollgate:{1.2.3.4}:sw-0s',
      'tollgate:{1.2.3.4}:a:b:sw-1m',
      'tollgate:{}:sw-1m',
      '{1.2.3.4}:sw-1m',
      'plain',
    ]) {
      expect(parseKey(other)).toBeUndefined()
    }
  })

  it("keyPattern matches every key of one identity and escapes the glob's metacharacters", () => {
    expect(keyPattern('tollgate', '1.2.3.4')).toBe('tollgate:{1.2.3.4}:*')
    expect(keyPattern('p*[x]?', 'a*b?[c]\\d')).toBe('p\\*\\[x\\]\\?:{a\\*b\\?\\[c\\]\\\\d}:*')
    expect(keyPattern('p', 'a}{b')).toBe(`p:{${identityTag('a}{b')}}:*`)
  })

  it.each([
    ['braces', 'a}{b'],
    ['an open brace', '{x'],
    ['control bytes', 'a\r\nb'],
    ['DEL', 'a\x7fb'],
    ['over 128 bytes', 'x'.repeat(MAX_IDENTITY_BYTES + 1)],
    ['over 128 UTF-8 bytes in fewer chars', 'é'.repeat(70)],
    ['the hashed marker itself', '~h:AAAA'],
  ])('hashes identities with %s', (_name, identity) => {
    const tag = identityTag(identity)
    expect(tag).toMatch(/^~h:[A-Za-z0-9_-]{32}$/)
    expect(buildKey('p', identity, 'sw-1m', 'q')).toBe(`p:{${tag}}:q:sw-1m`)
  })

  it('keeps safe identities readable', () => {
    expect(identityTag('user:42')).toBe('user:42')
    expect(identityTag('x'.repeat(MAX_IDENTITY_BYTES))).toBe('x'.repeat(MAX_IDENTITY_BYTES))
  })

  it('no identity can choose the slot, grow the key, or collide with another', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 300 }),
        fc.string({ unit: 'binary', maxLength: 300 }),
        (a, b) => {
          const ka = buildKey('p', a, 'sw-1m', 'q')
          // exactly one '{' and one '}', around the tag: the hash slot is the tag's
          expect(ka.split('{').length).toBe(2)
          expect(ka.split('}').length).toBe(2)
          expect(new TextEncoder().encode(ka).length).toBeLessThanOrEqual(4 + MAX_IDENTITY_BYTES + 10)
          if (a !== b && a.length > 0 && b.length > 0) expect(ka).not.toBe(buildKey('p', b, 'sw-1m', 'q'))
        },
      ),
    )
  })

  it('sha256 matches node:crypto', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => {
        expect(base64(sha256(s))).toBe(createHash('sha256').update(s).digest('base64'))
      }),
    )
  })
})
