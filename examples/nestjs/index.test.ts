/**
 * Starts the example as its own process (`node --import tsx/esm index.ts`) on a free port against the test
 * Redis, once per platform, then checks the app-wide limit, the login route, the exempt route and the
 * @nestjs/throttler controller.
 */
import { join } from 'node:path'
import { clearOfBoundary, type ExampleProcess, startExample, untilLoginAnswers } from '@tollgate/testkit'

describe.each(['express', 'fastify'])('the NestJS example on platform-%s', (platform) => {
  let app: ExampleProcess
  let base: string

  beforeAll(async () => {
    app = await startExample(join(__dirname, 'index.ts'), { PLATFORM: platform }, { loader: 'tsx/esm' })
    base = app.base
    // its Redis client may still be connecting when it listens: wait for the store (on the login
    // limiter, whose warm-up failure no test counts)
    await untilLoginAnswers(base)
  }, 40_000)
  afterAll(async () => {
    await app?.stop()
  })

  const login = (body: unknown) =>
    fetch(`${base}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })

  it('a concurrent burst of 110: exactly 100 admitted, then 429 with RateLimit headers and a problem body', async () => {
    // the limit is per minute on a sliding window: a burst across a minute boundary may rightly admit more
    await clearOfBoundary(60_000, 8_000)
    const responses = await Promise.all(Array.from({ length: 110 }, () => fetch(`${base}/hello`)))
    const statuses = responses.map((r) => r.status)
    await Promise.all(responses.map((r) => r.arrayBuffer()))
    expect(statuses.filter((s) => s === 200)).toHaveLength(100)
    expect(statuses.filter((s) => s === 429)).toHaveLength(10)
    const refused = await fetch(`${base}/hello`)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('ratelimit-policy')).toMatch(/^"default";q=100;w=60;pk=:[A-Za-z0-9+/]+:$/)
    expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
    expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
  })

  it('/health is exempt: no limit, no headers', async () => {
    const res = await fetch(`${base}/health`)
    expect(res.status).toBe(200)
    expect(res.headers.get('ratelimit')).toBeNull()
  })

  it('login: only failed attempts are charged to the account', async () => {
    // the account's window is a fixed 15 minutes: its attempts must not straddle a boundary
    await clearOfBoundary(15 * 60_000, 8_000)
    // Successes are refunded: many in a row never reach the account's 5.
    for (let i = 0; i < 7; i++) {
      const ok = await login({ email: 'ada@example.com', password: 'correct horse' })
      expect(ok.status).toBe(200)
    }
    const failures: number[] = []
    for (let i = 0; i < 6; i++)
      failures.push((await login({ email: 'bob@example.com', password: 'guess' })).status)
    expect(failures).toEqual([401, 401, 401, 401, 401, 429])
    const refused = await login({ email: 'bob@example.com', password: 'battery staple' })
    expect(refused.status).toBe(429)
    expect(await refused.json()).toMatchObject({ 'violated-policies': ['account'] })
  })

  it('/catalog/search keeps its @Throttle() limit of 5, counted in Redis by TollgateThrottlerStorage', async () => {
    const statuses: number[] = []
    for (let i = 0; i < 6; i++) statuses.push((await fetch(`${base}/catalog/search`)).status)
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429])
    const list = await fetch(`${base}/catalog`)
    expect(list.status).toBe(200)
    // @nestjs/throttler's own headers; the Tollgate guard skips this controller.
    expect(list.headers.get('x-ratelimit-limit')).toBe('20')
    expect(list.headers.get('ratelimit')).toBeNull()
  })
})
