/**
 * Starts the example as its own process (`node --import tsx index.ts`) on a free port against the test
 * Redis, then checks a burst on /api, the per-plan limits and the login route.
 */
import { join } from 'node:path'
import {
  clearOfBoundary,
  decisionsByOutcome,
  type ExampleProcess,
  startExample,
  untilLoginAnswers,
} from '@tollgate/testkit'

let app: ExampleProcess
let base: string

beforeAll(async () => {
  // the test plays the proxy: the last X-Forwarded-For entry names the client
  app = await startExample(join(__dirname, 'index.ts'), { TRUST_PROXY: '1' })
  base = app.base
  // its Redis client connects after it listens: wait for the store (on the login limiter, not the one counted)
  await untilLoginAnswers(base)
}, 40_000)

afterAll(async () => {
  await app?.stop()
})

/** Each test is its own client, behind the one trusted proxy the test plays. */
const from = (ip: string, headers: Record<string, string> = {}) => ({
  headers: { 'x-forwarded-for': ip, ...headers },
})

const login = (ip: string, body: unknown) =>
  fetch(`${base}/login`, {
    method: 'POST',
    ...from(ip, { 'content-type': 'application/json' }),
    body: JSON.stringify(body),
  })

it('a concurrent burst of 110 on /api: exactly 100 admitted, then 429 with RateLimit headers', async () => {
  // the limit is per minute on a sliding window: a burst across a minute boundary may rightly admit more
  await clearOfBoundary(60_000, 8_000)
  const responses = await Promise.all(
    Array.from({ length: 110 }, () => fetch(`${base}/api/hello`, from('198.51.100.1'))),
  )
  const statuses = responses.map((r) => r.status)
  await Promise.all(responses.map((r) => r.arrayBuffer()))
  expect(statuses.filter((s) => s === 200)).toHaveLength(100)
  expect(statuses.filter((s) => s === 429)).toHaveLength(10)
  const refused = await fetch(`${base}/api/hello`, from('198.51.100.1'))
  expect(refused.status).toBe(429)
  expect(refused.headers.get('ratelimit-policy')).toMatch(/^"default";q=100;w=60;pk=:[A-Za-z0-9+/]+:$/)
  expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
  expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
  // Another client is not affected, and sees its own quota.
  const other = await fetch(`${base}/api/hello`, from('198.51.100.9'))
  expect(other.status).toBe(200)
  expect(await other.json()).toEqual({ hello: 'world', remaining: 99 })
}, 30_000)

it('/metrics (prom-client, @tollgate/prometheus): the burst above, by limiter, policy and outcome', async () => {
  const res = await fetch(`${base}/metrics`)
  expect(res.status).toBe(200)
  const text = await res.text()
  const count = decisionsByOutcome(text, 'api', 'default')
  // Refusals are counted whether the store or the deny cache answered them.
  expect([count.allowed, count.refused, count.shadow_refused]).toEqual([101, 11, 0])
  expect(text).toMatch(/^tollgate_store_duration_seconds_count\{limiter="api",operation="consume"\} \d+$/m)
})

it('per-plan limits on /api/report: free 10 per minute, pro more', async () => {
  const run = async (key: string, n: number) => {
    const out: number[] = []
    for (let i = 0; i < n; i++) {
      const r = await fetch(`${base}/api/report`, from('198.51.100.2', { 'x-api-key': key }))
      out.push(r.status)
      await r.arrayBuffer()
    }
    return out
  }
  expect(await run('k_free_1', 11)).toEqual([...Array(10).fill(200), 429])
  expect(await run('k_pro_1', 15)).toEqual(Array(15).fill(200))
  const pro = await fetch(`${base}/api/report`, from('198.51.100.2', { 'x-api-key': 'k_pro_1' }))
  expect(pro.headers.get('ratelimit-policy')).toMatch(/^"default";q=100;w=60;/)
})

it('login: only failed attempts are charged, per account and per address', async () => {
  for (let i = 0; i < 8; i++) {
    expect(
      (await login('198.51.100.3', { email: 'bob@example.com', password: 'battery staple' })).status,
    ).toBe(200)
  }
  const failures: number[] = []
  for (let i = 0; i < 6; i++) {
    failures.push((await login('198.51.100.3', { email: 'ada@example.com', password: 'wrong' })).status)
  }
  expect(failures).toEqual([401, 401, 401, 401, 401, 429])
  const locked = await login('198.51.100.3', { email: 'ada@example.com', password: 'correct horse' })
  expect(locked.status).toBe(429)
  expect(await locked.json()).toMatchObject({ status: 429, 'violated-policies': ['account'] })
})

it('login: guesses across accounts from one IPv6 /56 hit the per-address policy', async () => {
  const statuses: number[] = []
  for (let i = 0; i < 21; i++) {
    // A different address of one /56 and a different account every time.
    const r = await login(`2001:db8:0:4${i.toString(16).padStart(2, '0')}::${i + 1}`, {
      email: `user${i}@example.com`,
      password: 'guess',
    })
    statuses.push(r.status)
    if (i === 20) expect(await r.json()).toMatchObject({ 'violated-policies': ['ip'] })
  }
  expect(statuses).toEqual([...Array(20).fill(401), 429])
})
