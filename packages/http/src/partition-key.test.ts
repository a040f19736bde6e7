import { createHash } from 'node:crypto'
import { rateLimitHeaders } from './headers'
import { partitionKey } from './partition-key'
import { burst, decide, example, pair } from './test-decisions'

/** What `pk` must be, computed independently of the core's hash module. */
function expectedPk(key: string): string {
  return createHash('sha256').update(key).digest().subarray(0, 12).toString('base64')
}

describe("the 'ietf' partition key (pk)", () => {
  it('adds pk = 16 base64 chars of SHA-256(key), never the key', () => {
    const headers = rateLimitHeaders(example, { format: 'ietf' })
    const pk = expectedPk('user:42')
    expect(pk).toMatch(/^[A-Za-z0-9+/]{16}$/)
    expect(headers['RateLimit-Policy']).toBe(`"burst";q=10;w=1;pk=:${pk}:, "daily";q=1000;w=86400;pk=:${pk}:`)
    expect(headers.RateLimit).toBe(`"burst";r=9;t=1;pk=:${pk}:, "daily";r=812;t=40321;pk=:${pk}:`)
    expect(JSON.stringify(headers)).not.toContain('user:42')
    expect(partitionKey('user:42')).toBe(pk)
  })

  it('gives each policy the pk of its own key', () => {
    const d = decide([
      pair({ policy: 'ip', key: 'ip:1.2.3.4' }),
      pair({ policy: 'account', key: 'email:a@b.c' }),
    ])
    const headers = rateLimitHeaders(d, { format: 'ietf' })
    expect(headers.RateLimit).toBe(
      `"ip";r=9;t=1;pk=:${expectedPk('ip:1.2.3.4')}:, "account";r=9;t=1;pk=:${expectedPk('email:a@b.c')}:`,
    )
  })

  it('hashes keys correctly past the cache (long, unicode, many distinct)', () => {
    const long = `k${'x'.repeat(1000)}`
    expect(partitionKey(long)).toBe(expectedPk(long))
    expect(partitionKey('ключ🔑')).toBe(expectedPk('ключ🔑'))
    for (let i = 0; i < 3000; i++) expect(partitionKey(`user:${i}`)).toBe(expectedPk(`user:${i}`))
    expect(partitionKey('user:0')).toBe(expectedPk('user:0'))
  })

  it('accepts a custom partition key function', () => {
    const headers = rateLimitHeaders(decide([burst]), { format: 'ietf', partitionKey: () => 'c2VjcmV0' })
    expect(headers['RateLimit-Policy']).toBe('"burst";q=10;w=1;pk=:c2VjcmV0:')
  })
})
