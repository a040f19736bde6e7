/** Options the adapter must refuse when the app is built, and inline limiter options. */
import { type RateLimiter, RedisStore } from '@tollgate/core'
import { fail, freshPrefix, type SuiteContext } from './context'
import type { AppSpec, SuiteOptions } from './types'

export function describeOptions(s: SuiteContext): void {
  const { limiter, start, statuses } = s
  describe('options', () => {
    const bad: Array<[string, (l: RateLimiter) => Record<string, unknown>]> = [
      ['limiter', () => ({})],
      ['limiter', () => ({ limiter: 'api' })],
      ['windowMs', (l) => ({ limiter: l, windowMs: 1000 })],
      ['headers', (l) => ({ limiter: l, headers: 'ietf-9' })],
      ['legacyHeaders', (l) => ({ limiter: l, legacyHeaders: 'yes' })],
      ['cost', (l) => ({ limiter: l, cost: -1 })],
      ['cost', (l) => ({ limiter: l, cost: 1.5 })],
      ['key', (l) => ({ limiter: l, key: 'ip' })],
      ['skip', (l) => ({ limiter: l, skip: true })],
      ['shadow', (l) => ({ limiter: l, shadow: 1 })],
      ['skipFailedRequests', (l) => ({ limiter: l, skipFailedRequests: 'true' })],
      ['requestWasSuccessful', (l) => ({ limiter: l, skipFailedRequests: true, requestWasSuccessful: true })],
      ['requestWasSuccessful', (l) => ({ limiter: l, requestWasSuccessful: () => true })],
      ['ipv6Subnet', (l) => ({ limiter: l, ipv6Subnet: 20 })],
      ['onStoreError', (l) => ({ limiter: l, onStoreError: 'maybe' })],
      ['group', (l) => ({ limiter: l, group: '' })],
      ['group', (l) => ({ limiter: l, group: 'two words' })],
      ['group', (l) => ({ limiter: l, group: 7 })],
      ['limits', (l) => ({ limiter: l, limits: 5 })],
      ['group', (l) => ({ limiter: l, group: 'search', key: () => 'k' })],
      ['limit', (l) => ({ limiter: l, limit: 5 })],
      ['limit', () => ({ store: new RedisStore({ evalsha: fail, eval: fail }), limit: 0, window: '1m' })],
    ]

    it.each(bad)('bad option %s: the app fails to build with ConfigError', async (option, make) => {
      const options = make(limiter({ limit: 1, window: '1m' })) as unknown as SuiteOptions
      for (const spec of [
        { app: options, routes: [{ method: 'GET', path: '/hello' }] },
        { routes: [{ method: 'GET', path: '/hello', options }] },
      ] as AppSpec[]) {
        const built = s.factory(spec)
        await expect(built).rejects.toMatchObject({ code: 'ERR_TOLLGATE_CONFIG', option })
        // Should a factory resolve after all, close it.
        await built.then((app) => app.close()).catch(() => undefined)
      }
    })

    it('inline limiter options (store + limit + window) work', async () => {
      const options = {
        store: s.store,
        prefix: freshPrefix(),
        limit: 1,
        window: '1m',
      } as unknown as SuiteOptions
      const app = await start({ app: options, routes: [{ method: 'GET', path: '/hello' }] })
      expect(await statuses(app, 2, '/hello')).toEqual([200, 429])
    })
  })
}
