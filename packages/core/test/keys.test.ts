import { createHash } from 'node:crypto'
import fc from 'fast-check'
import { buildKey, identityTag, MAX_IDENTITY_BYTES } from '../src/entries/scripts'
import { base64, sha256 } from '../src/hash'

describe('keys', () => {
  it('puts the identity in one hash tag', () => {
    expect(buildKey('login', 'ip:1.2.3.4', 'ip')).toBe('login:{ip:1.2.3.4}:ip')
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
    expect(buildKey('p', identity, 'q')).toBe(`p:{${tag}}:q`)
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
          const ka = buildKey('p', a, 'q')
          // exactly one '{' and one '}', around the tag: the hash slot is the tag's
          expect(ka.split('{').length).toBe(2)
          expect(ka.split('}').length).toBe(2)
          expect(new TextEncoder().encode(ka).length).toBeLessThanOrEqual(4 + MAX_IDENTITY_BYTES + 4)
          if (a !== b && a.length > 0 && b.length > 0) expect(ka).not.toBe(buildKey('p', b, 'q'))
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
