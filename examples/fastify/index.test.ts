/**
 * Starts the example as its own process (`node --import tsx index.ts`) on a free port against the test
 * Redis, then checks a burst, the stricter /search limit, the login route and the unlimited /health.
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
  // the test plays the proxy: X-Forwarded-For names the client
  app = await startExample(join(__dirname, 'index.ts'), { TRUSTED_PROXIES: '127.0.0.1' })
  // its Redis client connects after it listens: wait for the store (on the login limiter, not the one counted)
  await untilLoginAnswers(app.base)
  base = app.base
}, 40_000)

afterAll(async () => {
  await app?.stop()
})

/** Each test is its own client, named by the proxy the test plays. */
const from = (ip: string, headers: Record<string, string> = {}) => ({
  headers: { 'x-forwarded-for': ip, ...headers },
})

async function statuses(n: number, path: string, ip: string): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const res = await fetch(base + path, from(ip))
    out.push(res.status)
    await res.arrayBuffer()
  }
  return out
}

it('a burst of 110 on /hello: exactly 100 admitted, then 429 with RateLimit headers', async () => {
  // the limit is per minute on a sliding window: a burst across a minute boundary may rightly admit more
  await clearOfBoundary(60_000, 8_000)
  const codes: number[] = []
  // Ten waves of eleven concurrent requests.
  for (let wave = 0; wave < 10; wave++) {
    const responses = await Promise.all(
      Array.from({ length: 11 }, () => fetch(`${base}/hello`, from('198.51.100.1'))),
    )
    for (const res of responses) {
      codes.push(res.status)
      await res.arrayBuffer()
    }
  }
  expect(codes.filter((s) => s === 200)).toHaveLength(100)
  expect(codes.filter((s) => s === 429)).toHaveLength(10)
  const refused = await fetch(`${base}/hello`, from('198.51.100.1'))
  expect(refused.status).toBe(429)
  expect(refused.headers.get('ratelimit-policy')).toMatch(/^"default";q=100;w=60;pk=:[A-Za-z0-9+/]+:$/)
  expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/)
  expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
  // Another client is not affected.
  expect((await fetch(`${base}/hello`, from('198.51.100.9'))).status).toBe(200)
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

it('/search has a stricter budget of its own: 10, then 429; the app-wide budget is untouched', async () => {
  expect(await statuses(11, '/search?q=tollgate', '198.51.100.2')).toEqual([...Array(10).fill(200), 429])
  const hello = await fetch(`${base}/hello`, from('198.51.100.2'))
  expect(await hello.json()).toEqual({ hello: 'world', remaining: 99 })
})

it('/login is keyed on the email in the body and only charges failed attempts', async () => {
  const login = (email: string, password: string) =>
    fetch(`${base}/login`, {
      method: 'POST',
      ...from('198.51.100.3', { 'content-type': 'application/json' }),
      body: JSON.stringify({ email, password }),
    })
  // Successful logins are refunded: many in a row all pass.
  for (let i = 0; i < 8; i++) expect((await login('bob@example.com', 'battery staple')).status).toBe(200)
  // Five failures lock the account, even for the right password now...
  const failures: number[] = []
  for (let i = 0; i < 5; i++) failures.push((await login('ada@example.com', 'wrong')).status)
  expect(failures).toEqual([401, 401, 401, 401, 401])
  const locked = await login('Ada@Example.com', 'correct horse')
  expect(locked.status).toBe(429)
  expect(locked.headers.get('ratelimit-policy')).toMatch(/^"default";q=5;w=900;/)
  // ...while another account, from the same IP, is not affected.
  expect((await login('bob@example.com', 'battery staple')).status).toBe(200)
})

it('/catalog/search and /catalog/suggest spend from one group budget of 20', async () => {
  const ip = '198.51.100.5'
  const search = await statuses(12, '/catalog/search', ip)
  const suggest = await statuses(9, '/catalog/suggest', ip)
  expect([...search, ...suggest]).toEqual([...Array(20).fill(200), 429])
  expect((await statuses(1, '/catalog/search', ip))[0]).toBe(429)
  // the group is its own budget: the app-wide one and another client are untouched
  expect(await statuses(1, '/hello', ip)).toEqual([200])
  expect(await statuses(1, '/catalog/suggest', '198.51.100.6')).toEqual([200])
})

it('/login: requestWasSuccessful counts wrong passwords (401), not malformed requests (400)', async () => {
  const post = (body: unknown) =>
    fetch(`${base}/login`, {
      method: 'POST',
      ...from('198.51.100.7', { 'content-type': 'application/json' }),
      body: JSON.stringify(body),
    })
  for (let i = 0; i < 7; i++) expect((await post({ email: 'carol@example.com' })).status).toBe(400)
  const wrong: number[] = []
  for (let i = 0; i < 6; i++) wrong.push((await post({ email: 'carol@example.com', password: 'x' })).status)
  expect(wrong).toEqual([401, 401, 401, 401, 401, 429])
})

it('/health is never limited and sends no RateLimit headers', async () => {
  expect(await statuses(120, '/health', '198.51.100.4')).toEqual(Array(120).fill(200))
  const res = await fetch(`${base}/health`, from('198.51.100.4'))
  expect(res.headers.get('ratelimit')).toBeNull()
})
