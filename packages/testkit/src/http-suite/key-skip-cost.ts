/** The request functions: keys, skip, per-request limits and cost, and what a bad answer of theirs gets. */
import diagnostics_channel from 'node:diagnostics_channel'
import { CHANNEL_NAMES, InputError, RateLimiter, RedisStore, type TollgateEvent } from '@tollgate/core'
import { fail, freshPrefix, type SuiteContext } from './context'
import { rateLimitFields } from './rate-limit-fields'
import { request } from './request'
import type { SuiteRequest } from './types'

/** Runs `fn` with console.warn silenced: a bad answer's log line is expected there. */
async function quietly<T>(fn: () => Promise<T>): Promise<T> {
  const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
  try {
    return await fn()
  } finally {
    warn.mockRestore()
  }
}

export function describeKeySkipCost(s: SuiteContext): void {
  const { limiter, start, get, statuses } = s
  describe('key, skip, cost', () => {
    it('a custom string key (one budget across client IPs)', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        trustProxy: 1,
        app: { limiter: api, key: (req) => `user:${req.header('x-user')}` },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const a = { 'x-user': 'alice' }
      expect((await get(app, '/hello', { ...a, 'x-forwarded-for': '1.1.1.1' })).status).toBe(200)
      expect((await get(app, '/hello', { ...a, 'x-forwarded-for': '2.2.2.2' })).status).toBe(200)
      expect((await get(app, '/hello', { ...a, 'x-forwarded-for': '3.3.3.3' })).status).toBe(429)
      expect((await get(app, '/hello', { 'x-user': 'bob' })).status).toBe(200)
    })

    it('a multi-policy record key from the JSON body and the client IP (route-level)', async () => {
      const login = limiter({
        policies: { ip: { limit: 3, window: '60s' }, account: { limit: 2, window: '60s' } },
      })
      const app = await start({
        routes: [
          {
            method: 'POST',
            path: '/login',
            options: {
              limiter: login,
              key: (req) => ({ ip: `ip:${req.ip}`, account: `email:${req.body?.email}` }),
            },
          },
        ],
      })
      const post = (email: string) => request(app.url, '/login', { method: 'POST', body: { email } })
      expect((await post('a@x.test')).status).toBe(200)
      expect((await post('a@x.test')).status).toBe(200)
      const perAccount = await post('a@x.test')
      expect(perAccount.status).toBe(429)
      expect(perAccount.json()['violated-policies']).toEqual(['account'])
      expect((await post('b@x.test')).status).toBe(200)
      const perIp = await post('c@x.test')
      expect(perIp.status).toBe(429)
      expect(perIp.json()['violated-policies']).toEqual(['ip'])
      expect(perIp.headers.ratelimit).toMatch(/^"ip";r=0;t=\d+;pk=:[^:]+:, "account";r=2;t=\d+;pk=:[^:]+:$/)
    })

    it("a key function returning '' is the app's bug: a 500, never a 200", async () => {
      const api = limiter({ limit: 5, window: '60s' })
      const app = await start({
        app: { limiter: api, key: () => '' },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const res = await quietly(() => get(app, '/hello'))
      expect(res.status).toBe(500)
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
      expect(app.calls('/hello')).toBe(0)
    })

    it('a key function answering undefined or an object: a bare 500, an invalid-input event, one log line', async () => {
      const events: TollgateEvent[] = []
      const published: unknown[] = []
      const onChannel = (message: unknown) => published.push(message)
      const api = limiter({ limit: 5, window: '60s', onEvent: (e) => events.push(e) })
      const app = await start({
        routes: [
          // what `email:${req.body.email}`'s safer-looking cousins answer when the field is missing
          { method: 'GET', path: '/undefined', options: { limiter: api, key: () => undefined as never } },
          {
            method: 'GET',
            path: '/object',
            options: { limiter: api, key: () => ({ email: 'a@x.test', secret: 'hunter2' }) as never },
          },
        ],
      })
      const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
      diagnostics_channel.subscribe(CHANNEL_NAMES.invalidInput, onChannel)
      try {
        for (const path of ['/undefined', '/object', '/undefined', '/object']) {
          const res = await get(app, path)
          expect([path, res.status]).toEqual([path, 500])
          expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
          // nothing of the app's internals: not the option's name, not the value
          expect(res.json()).toEqual({ type: 'about:blank', title: 'Internal Server Error', status: 500 })
          expect(res.text).not.toMatch(/key|hunter2|undefined/)
        }
        expect(app.calls('/undefined') + app.calls('/object')).toBe(0)
        expect(events.map((e) => e.type)).toEqual([
          'invalid-input',
          'invalid-input',
          'invalid-input',
          'invalid-input',
        ])
        const first = events[0] as Extract<TollgateEvent, { type: 'invalid-input' }>
        expect(first.error).toBeInstanceOf(InputError)
        expect(first.error.argument).toBe('key')
        expect(first.limiter).toBe(api.name)
        expect(published).toHaveLength(4)
        // the developer hears of it once per middleware, in the server's log, with the value
        const lines = warn.mock.calls.map((c) => String(c[0])).filter((l) => l.includes('ERR_TOLLGATE_INPUT'))
        expect(lines.length).toBeGreaterThanOrEqual(1)
        expect(lines.length).toBeLessThanOrEqual(2)
        expect(lines[0]).toMatch(/key must be .*received (undefined|\{)/)
      } finally {
        diagnostics_channel.unsubscribe(CHANNEL_NAMES.invalidInput, onChannel)
        warn.mockRestore()
      }
    })

    it('a record key missing a policy is a 500', async () => {
      const api = limiter({
        policies: { ip: { limit: 3, window: '60s' }, account: { limit: 2, window: '60s' } },
      })
      const app = await start({
        app: { limiter: api, key: () => ({ ip: 'x' }) },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      expect((await quietly(() => get(app, '/hello'))).status).toBe(500)
      expect(app.calls('/hello')).toBe(0)
    })

    it('skip: skipped requests are not limited, not counted, and get no headers', async () => {
      const api = limiter({ limit: 2, window: '60s' })
      const app = await start({
        app: { limiter: api, skip: (req) => req.header('x-internal') === 'yes' },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      for (let i = 0; i < 4; i++) {
        const res = await get(app, '/hello', { 'x-internal': 'yes' })
        expect(res.status).toBe(200)
        expect(rateLimitFields(res)).toEqual([])
      }
      expect(await statuses(app, 3, '/hello')).toEqual([200, 200, 429])
    })

    it('limits: per-request limits from the request, in one limiter; a bad value is a 500, never a pass', async () => {
      const api = limiter({ limit: 100, window: '1d' })
      const plan = (req: SuiteRequest) => {
        const v = req.header('x-plan')
        return v === 'async' ? Promise.resolve(2) : v === 'none' ? (undefined as never) : Number(v)
      }
      const app = await start({
        routes: [
          { method: 'GET', path: '/plan', options: { limiter: api, limits: plan, key: () => 'tenant' } },
        ],
      })
      const free = { 'x-plan': '2' }
      const first = await get(app, '/plan', free)
      expect(first.status).toBe(200)
      expect(first.headers['ratelimit-policy']).toMatch(/^"default";q=2;w=86400/)
      expect(await statuses(app, 2, '/plan', free)).toEqual([200, 429])
      // another plan's limit for the same key: the key's state, under that limit
      expect((await get(app, '/plan', { 'x-plan': '4' })).status).toBe(200)
      expect((await get(app, '/plan', { 'x-plan': 'async' })).status).toBe(429)
      for (const value of ['0', '-1', '1.5', 'abc', 'none']) {
        const r = await quietly(() => get(app, '/plan', { 'x-plan': value }))
        expect([value, r.status]).toEqual([value, 500])
        expect(r.json().detail).toBeUndefined()
      }
      expect(app.calls('/plan')).toBe(3)
    })

    it('cost: a number', async () => {
      const api = limiter({ limit: 5, window: '1d', algorithm: 'fixed-window' })
      const app = await start({
        app: { limiter: api, cost: 2 },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const first = await get(app, '/hello')
      expect(first.headers.ratelimit).toMatch(/"default";r=3;/)
      expect((await get(app, '/hello')).headers.ratelimit).toMatch(/"default";r=1;/)
      expect((await get(app, '/hello')).status).toBe(429)
    })

    it('cost: a function of the request; an invalid cost is a 500', async () => {
      const api = limiter({ limit: 5, window: '1d', algorithm: 'fixed-window' })
      const app = await start({
        app: { limiter: api, cost: (req) => Number(req.header('x-cost') ?? '1') },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      expect((await get(app, '/hello', { 'x-cost': '3' })).status).toBe(200)
      expect((await get(app, '/hello', { 'x-cost': '3' })).status).toBe(429)
      const last = await get(app, '/hello', { 'x-cost': '2' })
      expect(last.status).toBe(200)
      expect(last.headers.ratelimit).toMatch(/"default";r=0;/)
      for (const bad of ['abc', '-1', '1.5']) {
        const res = await quietly(() => get(app, '/hello', { 'x-cost': bad }))
        expect([bad, res.status]).toEqual([bad, 500])
      }
      expect(app.calls('/hello')).toBe(2)
    })

    it('a bad answer of a cost or key function is a 500: never the default cost of 1, never an admission', async () => {
      const api = limiter({ limit: 5, window: '1d' })
      // What a function may answer by mistake: nothing, a value of the wrong type, late or not.
      const costs: Record<string, () => unknown> = {
        undefined: () => undefined,
        text: () => '2',
        NaN: () => Number.NaN,
        'async undefined': async () => undefined,
      }
      const keys: Record<string, () => unknown> = {
        undefined: () => undefined,
        number: () => 42,
        empty: () => '',
        'async undefined': async () => undefined,
      }
      const from = (answers: Record<string, () => unknown>, good: unknown) => (req: SuiteRequest) => {
        const bad = answers[req.header('x-bad') ?? '']
        return bad === undefined ? good : bad()
      }
      const app = await start({
        routes: [
          {
            method: 'GET',
            path: '/cost',
            options: { limiter: api, cost: from(costs, 1) as never, key: () => 'c' },
          },
          { method: 'GET', path: '/key', options: { limiter: api, key: from(keys, 'k') as never } },
        ],
      })
      for (const [path, answers] of [
        ['/cost', costs],
        ['/key', keys],
      ] as const) {
        for (const bad of Object.keys(answers)) {
          const res = await quietly(() => get(app, path, { 'x-bad': bad }))
          expect([path, bad, res.status]).toEqual([path, bad, 500])
          expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8')
        }
      }
      expect(app.calls('/cost') + app.calls('/key')).toBe(0)
      // nothing was charged: the first good request sees the whole budget but its own unit
      expect((await get(app, '/cost')).headers.ratelimit).toMatch(/"default";r=4;/)
    })

    it("an InputError the app's function throws is a 400 (a bad answer a 500) even when the store is down under 'allow'", async () => {
      const api = new RateLimiter({
        store: new RedisStore({ evalsha: fail, eval: fail }),
        prefix: freshPrefix(),
        limit: 5,
        window: '1m',
        onStoreError: 'allow',
      })
      const refuse = () => {
        throw new InputError('x-account', 'an account id', 'nobody')
      }
      const app = await start({
        routes: [
          { method: 'GET', path: '/sync', options: { limiter: api, key: refuse } },
          { method: 'GET', path: '/async', options: { limiter: api, key: async () => refuse() } },
          { method: 'GET', path: '/cost', options: { limiter: api, cost: () => undefined as never } },
          { method: 'GET', path: '/open', options: { limiter: api } },
        ],
      })
      for (const path of ['/sync', '/async']) {
        const res = await get(app, path)
        expect([path, res.status]).toEqual([path, 400])
        expect(res.json().detail).toBe('x-account must be an account id, received "nobody"')
        expect(app.calls(path)).toBe(0)
      }
      expect((await quietly(() => get(app, '/cost'))).status).toBe(500)
      expect(app.calls('/cost')).toBe(0)
      // the same limiter does fail open for a good request: the 400s and 500s are not the outage's answer
      expect((await get(app, '/open')).status).toBe(200)
    })
  })
}
