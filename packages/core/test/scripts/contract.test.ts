/**
 * A foreign worker (Python, Go…) that follows docs/scripts.md shares the budget: keys and arguments are
 * built here from the documented contract alone, and sent as raw EVALSHA / EVAL commands.
 */
import { createHash } from 'node:crypto'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { RateLimiter, RedisStore } from '../../src'
import { CONSUME, REFUND } from '../../src/entries/scripts'
import { nodeRedis } from '../clients'

// biome-ignore lint/suspicious/noControlCharactersInRegex: the contract names control bytes
const UNSAFE = /[{}\x00-\x1f\x7f]/
function documentedKey(prefix: string, identity: string, policy: string, sig: string): string {
  const raw = Buffer.from(identity, 'utf8')
  const tag =
    raw.length > 128 || UNSAFE.test(identity) || identity.startsWith('~h:')
      ? `~h:${createHash('sha256').update(raw).digest('base64url').slice(0, 32)}`
      : identity
  return `${prefix}:{${tag}}:${policy}:${sig}`
}

describe('the documented script contract', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  beforeAll(async () => {
    client = await nodeRedis()
  })
  afterAll(async () => {
    await client.quit()
  })

  it.each(['ip:203.0.113.9', 'a}{weird\nidentity', 'é'.repeat(100)])('keys match for %j', (identity) => {
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'login',
      policies: { ip: { limit: 1, window: '1m' } },
    })
    expect(limiter.keysFor({ ip: identity })).toEqual([documentedKey('login', identity, 'ip', 'sw-1m')])
  })

  it('a raw EVALSHA consume spends from the same budget a RateLimiter sees, and refunds with its tag', async () => {
    const prefix = uniquePrefix('contract')
    const login = new RateLimiter({
      store: new RedisStore(client),
      prefix,
      policies: {
        // day-long windows: a window boundary between the consume and the refund would (rightly) move
        // the refund to the previous window and change the numbers this test reads
        ip: { limit: 100, window: '1d' },
        account: { limit: 10, window: '1d', algorithm: 'fixed-window' },
      },
    })
    const keys = [
      documentedKey(prefix, 'ip:203.0.113.9', 'ip', 'sw-1d'),
      documentedKey(prefix, 'email:a@b.c', 'account', 'fw-1d'),
    ]
    const args = ['3', '2', '100', '86400000', '100', '1', '10', '86400000', '10']
    const send = async (name: 'CONSUME' | 'REFUND', a: string[]) => {
      const s = { CONSUME, REFUND }[name]
      try {
        return (await client.sendCommand(['EVALSHA', s.sha1, String(keys.length), ...keys, ...a])) as number[]
      } catch (e) {
        if (!String((e as Error).message).startsWith('NOSCRIPT')) throw e
        return (await client.sendCommand(['EVAL', s.source, String(keys.length), ...keys, ...a])) as number[]
      }
    }
    const reply = await send('CONSUME', args)
    expect(reply).toHaveLength(2 + 5 * 2)
    expect(reply[1]).toBe(1)
    expect([reply[2], reply[3]]).toEqual([1, 97])
    expect([reply[7], reply[8]]).toEqual([1, 7])
    const seen = await login.peek({ ip: 'ip:203.0.113.9', account: 'email:a@b.c' })
    expect(seen.policies.map((p) => p.remaining)).toEqual([97, 7])
    // refund 2 of the 3 with the tags from the reply
    await send('REFUND', [
      '2',
      '2',
      '100',
      '86400000',
      '100',
      String(reply[6]),
      '1',
      '10',
      '86400000',
      '10',
      String(reply[11]),
    ])
    const after = await login.peek({ ip: 'ip:203.0.113.9', account: 'email:a@b.c' })
    expect(after.policies.map((p) => p.remaining)).toEqual([99, 9])
  })
})
