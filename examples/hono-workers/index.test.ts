/**
 * Runs the example as its README says (`pnpm dev`: the Worker bundled and served by workerd, Redis over
 * the local Upstash REST server in front of the test Redis), then checks a burst and the login route.
 */
import { join } from 'node:path'
import { type ExampleProcess, runtimeForTests, sleepAtLeast, startExample } from '@tollgate/testkit'

// workerd comes from `pnpm install:runtimes`: without it the example cannot run (a failure in CI).
const suite = runtimeForTests('workerd') ? describe : describe.skip

suite('the Workers example in workerd', () => {
  let app: ExampleProcess
  let base: string

  beforeAll(async () => {
    // A deadline this busy test machine does not reach: the test is about the limits, not the deadline.
    app = await startExample(join(__dirname, 'dev.ts'), { TOLLGATE_TIMEOUT_MS: '10000' })
    base = app.base
    // One successful login (refunded, another account): the isolate builds its app and Redis caches the
    // scripts, so the burst below is not the cold first request racing the 500 ms deadline on a busy machine.
    const warm = await fetch(`${base}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'warm@example.com', password: 'correct horse' }),
    })
    expect(warm.status).toBe(200)
  }, 60_000)

  afterAll(async () => {
    await app?.stop()
  })

  it('a burst of 30 on /api: exactly 10 admitted, then 429 with RateLimit headers; a spoofed CF-Connecting-IP is overwritten', async () => {
    // Windows are aligned to the epoch (Redis TIME, this machine's clock): start the burst early in a 10 s
    // window, so it cannot straddle a boundary, where the sliding window's estimate may admit a little more
    // than the limit in a short interval (docs/algorithms.md).
    while (Date.now() % 10_000 < 100 || Date.now() % 10_000 > 1_000) await sleepAtLeast(50)
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        // The dev proxy, like Cloudflare, replaces whatever the client claims.
        fetch(`${base}/api/hello`, { headers: { 'CF-Connecting-IP': `203.0.113.${i}` } }),
      ),
    )
    const statuses = responses.map((r) => r.status)
    await Promise.all(responses.map((r) => r.arrayBuffer()))
    expect(statuses.filter((s) => s === 200)).toHaveLength(10)
    expect(statuses.filter((s) => s === 429)).toHaveLength(20)
    const refused = responses.find((r) => r.status === 429)!
    expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
    expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  })

  it('login: failures count per account, a success is refunded', async () => {
    const attempt = (password: string) =>
      fetch(`${base}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'ada@example.com', password }),
      })
    expect((await attempt('correct horse')).status).toBe(200)
    const statuses: number[] = []
    for (let i = 0; i < 6; i++) statuses.push((await attempt('wrong')).status)
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429])
  })
})
