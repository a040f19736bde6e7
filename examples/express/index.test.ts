/**
 * Starts the example as its own process (`node --import tsx index.ts`) on a free port against the test
 * Redis, then checks a burst on /api, the per-plan limits and the login route.
 */
import { join } from 'node:path'
import {
  at,
  clearOfBoundary,
  decisionsByOutcome,
  type ExampleProcess,
  redisUrl,
  startExample,
  untilLoginAnswers,
} from '@tollgate/testkit'
import { createClient } from 'redis'

let app: ExampleProcess
let base: string

beforeAll(async () => {
  // the test plays the proxy: X-Forwarded-For names the client
  app = await startExample(join(__dirname, 'index.ts'), { TRUST_PROXY: '1' })
  // its Redis client connects after it listens: wait for the store (on the login limiter, not the one counted)
  await untilLoginAnswers(app.base)
  base = app.base
}, 40_000)

afterAll(async () => {
  await app?.stop()
})

/** Each test is its own client (behind the trusted proxy the test plays). */
const from = (ip: string, headers: Record<string, string> = {}) => ({
  headers: { 'x-forwarded-for': ip, ...headers },
})

const post = (path: string, body: unknown) =>
  fetch(base + path, {
    method: 'POST',
    ...from('198.51.100.3', { 'content-type': 'application/json' }),
    body: JSON.stringify(body),
  })

it('a burst of 110 on /api: exactly 100 admitted, then 429 with RateLimit headers', async () => {
  // the limit is per minute on a sliding window: a burst across a minute boundary may rightly admit more
  await clearOfBoundary(60_000, 8_000)
  const statuses: number[] = []
  // Ten waves of eleven concurrent requests.
  for (let wave = 0; wave < 10; wave++) {
    const responses = await Promise.all(
      Array.from({ length: 11 }, () => fetch(`${base}/api/hello`, from('198.51.100.1'))),
    )
    for (const r of responses) {
      statuses.push(r.status)
      await r.arrayBuffer()
    }
  }
  expect(statuses.filter((s) => s === 200)).toHaveLength(100)
  expect(statuses.filter((s) => s === 429)).toHaveLength(10)
  const refused = await fetch(`${base}/api/hello`, from('198.51.100.1'))
  expect(refused.status).toBe(429)
  expect(refused.headers.get('ratelimit-policy')).toMatch(/^"default";q=100;w=60;pk=:[A-Za-z0-9+/]+:$/)
  expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/)
  // Another client is not affected.
  expect((await fetch(`${base}/api/hello`, from('198.51.100.9'))).status).toBe(200)
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

it('per-plan limits on /api/report: free 10, pro more', async () => {
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
  // the plan's limit is in the RateLimit-Policy of each response
  const pro = await fetch(`${base}/api/report`, from('198.51.100.2', { 'x-api-key': 'k_pro_1' }))
  expect(pro.headers.get('ratelimit-policy')).toMatch(/^"default";q=100;w=60;/)
})

it('login: only failed attempts are charged, per account and per IP', async () => {
  // Successful logins cost nothing: many in a row all pass.
  for (let i = 0; i < 8; i++) {
    expect((await post('/login', { email: 'bob@example.com', password: 'battery staple' })).status).toBe(200)
  }
  // Five failures lock the account (fixed window of 15 minutes)...
  const failures: number[] = []
  for (let i = 0; i < 6; i++) {
    failures.push((await post('/login', { email: 'ada@example.com', password: 'wrong' })).status)
  }
  expect(failures).toEqual([401, 401, 401, 401, 401, 429])
  // ...even for the right password now; the body names the account policy.
  const locked = await post('/login', { email: 'ada@example.com', password: 'correct horse' })
  expect(locked.status).toBe(429)
  expect(await locked.json()).toMatchObject({ status: 429, 'violated-policies': ['account'] })
  // The refusal locked the account out (the penalty): Retry-After is the 15-minute block, not the rest of
  // the window, and it does not count down while the client keeps trying.
  expect(locked.headers.get('retry-after')).toBe('900')
  expect(locked.headers.get('ratelimit')).toMatch(/"account";r=0;t=900;/)
  // Bob's account is untouched: his successes never counted against the shared IP either.
  expect((await post('/login', { email: 'bob@example.com', password: 'battery staple' })).status).toBe(200)
})

it('login: failures across many accounts from one IP hit the per-IP policy', async () => {
  const fail = (email: string) =>
    fetch(`${base}/login`, {
      method: 'POST',
      ...from('198.51.100.4', { 'content-type': 'application/json' }),
      body: JSON.stringify({ email, password: 'guess' }),
    })
  const statuses: number[] = []
  for (let i = 0; i < 20; i++) statuses.push((await fail(`user${i}@example.com`)).status)
  expect(statuses).toEqual(Array(20).fill(401))
  const refused = await fail('user20@example.com')
  expect(refused.status).toBe(429)
  expect(await refused.json()).toMatchObject({ 'violated-policies': ['ip'] })
  expect(refused.headers.get('ratelimit')).toMatch(
    /^"ip";r=0;t=\d+;pk=:[^:]+:, "account";r=5;t=0;pk=:[^:]+:$/,
  )
})

describe.each([
  [
    'TOLLGATE_STORAGE=compact: compact storage, its secret kept in Redis',
    { TOLLGATE_STORAGE: 'compact' },
    /^[\w-]{43}$/,
  ],
  ['TOLLGATE_SECRET: compact storage', { TOLLGATE_SECRET: 'example-test-secret-0123' }, /^[0-9a-f]{16}$/],
] as const)('with %s', (_what, env, held) => {
  let compact: ExampleProcess
  const prefix = `example-compact-${'TOLLGATE_STORAGE' in env ? 'kept' : 'secret'}-${process.pid}`
  beforeAll(async () => {
    compact = await startExample(join(__dirname, 'index.ts'), {
      TRUST_PROXY: '1',
      ...env,
      TOLLGATE_PREFIX: prefix,
    })
    await untilLoginAnswers(compact.base)
  }, 40_000)
  afterAll(async () => {
    await compact?.stop()
  })

  it('the same burst admits exactly 100, counted in a bucket hash, not a key per client', async () => {
    await clearOfBoundary(60_000, 8_000)
    const statuses = await Promise.all(
      Array.from({ length: 110 }, () =>
        fetch(`${compact.base}/api/hello`, from('198.51.100.77')).then(async (r) => {
          await r.arrayBuffer()
          return r.status
        }),
      ),
    )
    expect(statuses.filter((s) => s === 200)).toHaveLength(100)
    const redis = await createClient({ url: redisUrl() }).connect()
    try {
      // beside the counters, the secret they were placed with (kept), or its fingerprint
      expect(String(await redis.get(`${prefix}:api:{~h:s}`))).toMatch(held)
      const keys = (await redis.keys(`${prefix}:api:*`)).filter((k) => !/:\{~h:[st]\}/.test(k))
      expect(keys).toHaveLength(1)
      expect(keys[0]).toMatch(/^example-compact-\w+-\d+:api:\{~h:c\d+\}:sw-1m$/)
      // one field: q + 2 x count + previous x 2^27, q its window's parity (docs/scripts.md)
      const parity = Math.floor(Date.now() / 60_000) % 2
      expect(Object.values(await redis.hGetAll(at(keys, 0)))).toEqual([String(parity + 2 * 100)])
    } finally {
      await redis.quit()
    }
  }, 30_000)
})
