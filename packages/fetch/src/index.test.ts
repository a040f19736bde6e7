/**
 * What the shared suites do not cover: the options only fetch handlers have (`ip`, `route`, `waitUntil`),
 * `checkRateLimit`'s result, and responses whose headers cannot be changed. Handlers are called directly
 * with `Request` objects, against the suite's Redis.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { checkRateLimit, withRateLimit } from '@tollgate/fetch'
import { rateLimitHeaders } from '@tollgate/http'
import { redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const limiter = (limit = 2) =>
  new RateLimiter({
    store,
    prefix: `fetch-${process.pid}-${Date.now().toString(36)}-${++n}`,
    limit,
    window: '1d',
  })
const ok = () => new Response('ok')
const req = (path = '/', init?: RequestInit) => new Request(`http://app.test${path}`, init)
/** Like Bun's `server` or Deno's `info`: the address comes with the handler's second argument. */
type Peer = { address: string }
const peer = (address = '192.0.2.1'): Peer => ({ address })
const ip = (_req: Request, p: Peer) => p.address

beforeAll(async () => {
  redis = createClient({ url: redisUrl() })
  redis.on('error', () => undefined)
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis?.quit()
})

describe('options', () => {
  it('no ip and no key: ConfigError naming ip, never a header read silently', () => {
    expect(() => withRateLimit(ok, { limiter: limiter() })).toThrow(
      expect.objectContaining({ code: 'ERR_TOLLGATE_CONFIG', option: 'ip' }),
    )
    expect(() => withRateLimit(ok, { limiter: limiter(), key: () => 'all' })).not.toThrow()
  })

  it('route: a template, and not with key or group', () => {
    const l = limiter()
    for (const [options, option] of [
      [{ route: 'users' }, 'route'],
      [{ route: '/a b' }, 'route'],
      [{ route: '/users', key: () => 'k' }, 'route'],
      [{ route: '/users', group: 'g' }, 'route'],
      [{ ip: 'x-real-ip' }, 'ip'],
      [{ waitUntil: true }, 'waitUntil'],
      [{ onLimited: 429 }, 'onLimited'],
    ] as const) {
      expect(() => withRateLimit(ok, { limiter: l, ip, ...(options as object) })).toThrow(
        expect.objectContaining({ code: 'ERR_TOLLGATE_CONFIG', option }),
      )
    }
    expect(() => withRateLimit('ok' as never, { limiter: l, ip })).toThrow(
      expect.objectContaining({ option: 'handler' }),
    )
  })

  it('checkRateLimit refuses inline limiter options (they would build a limiter per call)', async () => {
    await expect(checkRateLimit(req(), { store, limit: 1, window: '1m', ip }, peer())).rejects.toMatchObject({
      code: 'ERR_TOLLGATE_CONFIG',
      option: 'limiter',
    })
  })
})

describe('checkRateLimit', () => {
  it('headers to add while admitted, then the 429 to send; ip gets the handler arguments', async () => {
    const l = limiter(2)
    const options = { limiter: l, ip }
    const seen = []
    for (let i = 0; i < 2; i++) {
      const { decision, headers, response } = await checkRateLimit(req(), options, peer())
      expect(response).toBeUndefined()
      expect(headers).toEqual(rateLimitHeaders(decision!, { format: 'ietf', retryAfter: true }))
      seen.push(decision!.remaining)
    }
    expect(seen).toEqual([1, 0])
    // another address has its own budget
    expect((await checkRateLimit(req(), options, peer('192.0.2.2'))).response).toBeUndefined()
    const refused = await checkRateLimit(req(), options, peer())
    expect(refused.decision?.allowed).toBe(false)
    expect(refused.response?.status).toBe(429)
    expect(refused.response?.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
    for (const [name, value] of Object.entries(refused.headers))
      expect(refused.response?.headers.get(name)).toBe(value)
    expect(Number(refused.response?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(await refused.response?.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
    expect((await l.peek('192.0.2.1')).remaining).toBe(0)
  })

  it('skip: no decision, no headers, nothing to send', async () => {
    const result = await checkRateLimit(req(), { limiter: limiter(), ip, skip: () => true }, peer())
    expect(result).toMatchObject({ decision: undefined, headers: {}, response: undefined })
    await expect(result.done(200)).resolves.toBeUndefined()
  })

  it('done(response) refunds under skipFailedRequests, once', async () => {
    const l = limiter(2)
    const options = { limiter: l, ip, skipFailedRequests: true }
    const failed = await checkRateLimit(req(), options, peer())
    expect((await l.peek('192.0.2.1')).remaining).toBe(1)
    await failed.done(new Response('no', { status: 500 }))
    await failed.done(500)
    expect((await l.peek('192.0.2.1')).remaining).toBe(2)
    const fine = await checkRateLimit(req(), options, peer())
    await fine.done(200)
    expect((await l.peek('192.0.2.1')).remaining).toBe(1)
  })

  it('a bad address from ip() is a 400, never a pass or a shared budget', async () => {
    const result = await checkRateLimit(req(), { limiter: limiter(), ip: () => 'not-an-ip' })
    expect(result.response?.status).toBe(400)
    expect(result.decision).toBeUndefined()
  })
})

describe('withRateLimit', () => {
  it('route: its own budget on a shared limiter; requests passed through with their arguments', async () => {
    const l = limiter(1)
    const seen: Peer[] = []
    const handler = (_r: Request, p: Peer) => {
      seen.push(p)
      return ok()
    }
    const users = withRateLimit(handler, { limiter: l, ip, route: '/users/[id]' })
    const posts = withRateLimit(handler, { limiter: l, ip, route: '/posts' })
    const p = peer()
    expect((await users(req('/users/1'), p)).status).toBe(200)
    expect((await users(req('/users/2'), p)).status).toBe(429) // one route, whatever the id
    expect((await posts(req('/posts'), p)).status).toBe(200)
    expect(seen).toEqual([p, p])
    expect((await l.peek('192.0.2.1 /users/[id]')).remaining).toBe(0)
  })

  it('a response with immutable headers (a redirect, a proxied fetch) is copied with the headers', async () => {
    const wrapped = withRateLimit(() => Response.redirect('http://app.test/next', 302), {
      limiter: limiter(),
      ip,
    })
    const res = await wrapped(req(), peer())
    expect(res.status).toBe(302)
    expect(res.headers.get('location')).toBe('http://app.test/next')
    expect(res.headers.get('ratelimit')).toMatch(/^"default";r=1;t=\d+;pk=:/)
  })

  it("the handler's own header wins; onLimited's answer gets the headers it lacks", async () => {
    const wrapped = withRateLimit(() => new Response('ok', { headers: { RateLimit: 'mine' } }), {
      limiter: limiter(1),
      ip,
      onLimited: (_r, d) => Response.json({ wait: d.retryAfterMs }, { status: 429 }),
    })
    expect((await wrapped(req(), peer())).headers.get('ratelimit')).toBe('mine')
    const refused = await wrapped(req(), peer())
    expect(refused.status).toBe(429)
    expect(refused.headers.get('content-type')).toBe('application/json')
    expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  })

  it("a refund is handed to the runtime's waitUntil (Workers' ctx), or to the waitUntil option", async () => {
    const l = limiter(2)
    const kept: Promise<unknown>[] = []
    const ctx = { waitUntil: (p: Promise<unknown>) => kept.push(p) }
    const worker = withRateLimit(
      (_r: Request, _env: unknown, _ctx: typeof ctx) => new Response('no', { status: 503 }),
      {
        limiter: l,
        key: () => 'worker',
        skipFailedRequests: true,
      },
    )
    expect((await worker(req(), {}, ctx)).status).toBe(503)
    expect(kept).toHaveLength(1)
    await Promise.all(kept)
    expect((await l.peek('worker')).remaining).toBe(2)

    const after: Promise<unknown>[] = []
    const next = withRateLimit(() => new Response('no', { status: 500 }), {
      limiter: l,
      key: () => 'next',
      skipFailedRequests: true,
      waitUntil: (p) => after.push(p),
    })
    await next(req())
    expect(after).toHaveLength(1)
    await Promise.all(after)
    expect((await l.peek('next')).remaining).toBe(2)
  })

  it('a handler that throws is refunded as a failure, and the error goes on', async () => {
    const l = limiter(2)
    const wrapped = withRateLimit(
      () => {
        throw new Error('boom')
      },
      { limiter: l, key: () => 'throws', skipFailedRequests: true, waitUntil: (p) => kept.push(p) },
    )
    const kept: Promise<unknown>[] = []
    await expect(wrapped(req())).rejects.toThrow('boom')
    await Promise.all(kept)
    expect((await l.peek('throws')).remaining).toBe(2)
  })
})
