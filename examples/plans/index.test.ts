/**
 * The plans example against the test Redis: a free and a pro customer see their plan's monthly quota in
 * `RateLimit-Policy`; the operator raises one customer with the `tollgate` command line, and the app's
 * next request for that customer runs under 500,000, while the others keep their plan's.
 */
import path from 'node:path'
import { run } from '@tollgate/cli'
import { RedisStore } from '@tollgate/core'
import { redisUrl, runCli } from '@tollgate/testkit'
import { createClient } from 'redis'
import { createApp } from './app'

const client = createClient({ url: redisUrl() })
client.on('error', () => {})
beforeAll(() => client.connect())
afterAll(() => client.quit())

const policyOf = async (app: ReturnType<typeof createApp>['app'], key: string) => {
  const res = await app.request('/v1/things', { headers: { 'x-api-key': key } })
  expect(res.status).toBe(200)
  // each policy's quota, e.g. '"monthly";q=1000;w=2592000;pk=:…:' -> monthly 1000
  const quotas: Record<string, number> = {}
  for (const m of (res.headers.get('ratelimit-policy') ?? '').matchAll(/"(\w+)";q=(\d+)/g))
    quotas[m[1]!] = Number(m[2])
  return quotas
}

async function tollgate(...args: string[]): Promise<{ code: number; out: string }> {
  const { code, out } = await runCli(run, args)
  return { code, out }
}

it('plans by API key, and one customer raised from the command line', async () => {
  const { app, limiter } = createApp(new RedisStore(client))
  for (const key of ['key_free', 'key_pro', 'key_big']) {
    await limiter.reset(`key:${key}`)
    await limiter.overrides.delete(`key:${key}`)
  }
  expect(await policyOf(app, 'key_free')).toEqual({ second: 10, monthly: 1000 })
  expect(await policyOf(app, 'key_pro')).toEqual({ second: 10, monthly: 100_000 })
  expect(await policyOf(app, 'key_big')).toEqual({ second: 10, monthly: 100_000 })

  const config = path.join(__dirname, 'limits.ts')
  const raised = await tollgate(
    'override',
    'set',
    'key:key_big',
    'monthly=500000',
    '--config',
    config,
    '--url',
    redisUrl(),
  )
  expect(raised).toEqual({
    code: 0,
    out: "key:key_big: monthly=500000 (no end), applied on every process's next call\n",
  })
  expect(await policyOf(app, 'key_big')).toEqual({ second: 10, monthly: 500_000 })
  expect(await policyOf(app, 'key_pro')).toEqual({ second: 10, monthly: 100_000 })
  // its two requests so far count against the raised quota
  expect((await limiter.peek('key:key_big')).policies[1]).toMatchObject({
    limit: 500_000,
    remaining: 499_998,
  })

  const listed = await tollgate('override', 'list', '--config', config, '--url', redisUrl(), '--json')
  expect(JSON.parse(listed.out)).toEqual([
    { identity: 'key:key_big', limits: { monthly: { limit: 500000 } }, expiresInMs: null },
  ])
  expect(
    (await tollgate('override', 'rm', 'key:key_big', '--config', config, '--url', redisUrl())).code,
  ).toBe(0)
  expect(await policyOf(app, 'key_big')).toEqual({ second: 10, monthly: 100_000 })
  expect((await app.request('/v1/things')).status).toBe(401)
})

it('a customer billed on the 17th: the monthly quota renews on their day, in Berlin time', async () => {
  const { app, limiter } = createApp(new RedisStore(client))
  await limiter.reset('key:key_inv')
  await limiter.overrides.delete('key:key_inv')
  const config = path.join(__dirname, 'limits.ts')
  const set = await tollgate(
    'override',
    'set',
    'key:key_inv',
    'monthly=@17',
    '--config',
    config,
    '--url',
    redisUrl(),
  )
  expect(set.code).toBe(0)
  const res = await app.request('/v1/things', { headers: { 'x-api-key': 'key_inv' } })
  expect(res.status).toBe(200)
  // the monthly policy's seconds to its reset, e.g. '"monthly";r=99999;t=1000000'
  const t = Number(/"monthly";r=\d+;t=(\d+)/.exec(res.headers.get('ratelimit') ?? '')?.[1])
  const ends = new Intl.DateTimeFormat('en-GB', {
    timeZone: 'Europe/Berlin',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    hourCycle: 'h23',
  }).formatToParts(Math.round((Date.now() + t * 1000) / 600_000) * 600_000)
  const part = (type: string) => Number(ends.find((p) => p.type === type)!.value)
  expect([part('day'), part('hour'), part('minute')]).toEqual([17, 0, 0])
  await limiter.overrides.delete('key:key_inv')
  await limiter.reset('key:key_inv')
})
