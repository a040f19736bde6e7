/**
 * `tollgate override` (its `run`, what the bin calls) against a real redis-server: set from the command
 * line, applied by an app's limiter on its next call; get, list (text and --json) and rm; and bad input
 * refused with a usage error (exit 2) before anything is written.
 */
import { run } from '@tollgate/cli'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { type RedisServerHandle, runCli, startRedisServer } from '@tollgate/testkit'
import { createClient } from 'redis'

async function tollgate(...args: string[]) {
  const { code, stdout, stderr } = await runCli(run, args)
  return { code, stdout, stderr }
}

let server: RedisServerHandle
let client: ReturnType<typeof createClient>
beforeAll(async () => {
  server = await startRedisServer()
  client = createClient({ url: server.url })
  client.on('error', () => {})
  await client.connect()
})
afterAll(async () => {
  await client.quit()
  await server.stop()
})

const described = ['--prefix', 'ov', '--policy', 'rate=10/1m', '--policy', 'monthly=1000/month@Europe/Berlin']

it('set, get, list, rm: applied by the app on its next call', async () => {
  const url = ['--url', server.url]
  const api = new RateLimiter({
    store: new RedisStore(client),
    prefix: 'ov',
    policies: {
      rate: { limit: 10, window: '1m' },
      monthly: { limit: 1000, window: { calendar: 'month', timeZone: 'Europe/Berlin' } },
    },
  })
  expect((await api.consume('key:acme')).policies[1]!.limit).toBe(1000)
  const set = await tollgate(
    'override',
    'set',
    'key:acme',
    'monthly=500000',
    '--ttl',
    '30d',
    ...described,
    ...url,
  )
  expect(set).toEqual({
    code: 0,
    stdout: "key:acme: monthly=500000 (for 30d), applied on every process's next call\n",
    stderr: '',
  })
  expect((await api.consume('key:acme')).policies[1]).toMatchObject({ limit: 500_000, remaining: 499_998 })

  expect((await tollgate('override', 'get', 'key:acme', '--prefix', 'ov', ...url)).stdout).toBe(
    'key:acme: monthly=500000\n',
  )
  expect((await tollgate('override', 'get', 'key:none', '--prefix', 'ov', ...url)).stdout).toBe(
    'key:none: no override\n',
  )
  const listed = await tollgate('override', 'list', '--prefix', 'ov', ...url)
  expect(listed.stdout.split('\n')[0]).toMatch(/^IDENTITY\s+LIMITS\s+ENDS IN$/)
  expect(listed.stdout.split('\n')[1]).toMatch(/^key:acme\s+monthly=500000\s+(29|30)d/)
  const json = JSON.parse((await tollgate('override', 'list', '--prefix', 'ov', '--json', ...url)).stdout)
  expect(json).toEqual([
    { identity: 'key:acme', limits: { monthly: { limit: 500000 } }, expiresInMs: expect.any(Number) },
  ])

  expect((await tollgate('override', 'rm', 'key:acme', '--prefix', 'ov', ...url)).code).toBe(0)
  expect((await api.consume('key:acme')).policies[1]).toMatchObject({ limit: 1000, remaining: 997 })
  expect((await tollgate('override', 'list', '--prefix', 'ov', ...url)).stdout).toBe(
    "no overrides under prefix 'ov'\n",
  )
})

it("a billing day: monthly=500000@17 raises the quota and renews it on the customer's day", async () => {
  const url = ['--url', server.url]
  const prefix = ['--prefix', 'ovb']
  const policies = ['--policy', 'rate=10/1m', '--policy', 'monthly=1000/month@America/New_York']
  const api = new RateLimiter({
    store: new RedisStore(client),
    prefix: 'ovb',
    policies: {
      rate: { limit: 10, window: '1m' },
      monthly: { limit: 1000, window: { calendar: 'month', timeZone: 'America/New_York' } },
    },
  })
  const set = await tollgate(
    'override',
    'set',
    'key:acme',
    'monthly=500000@17',
    ...prefix,
    ...policies,
    ...url,
  )
  expect(set).toMatchObject({
    code: 0,
    stdout: "key:acme: monthly=500000@17 (no end), applied on every process's next call\n",
  })
  const only = await tollgate('override', 'set', 'key:globex', 'monthly=@3', ...prefix, ...policies, ...url)
  expect(only.code).toBe(0)
  // where a period ends, read in the zone: the customer's day, at local midnight
  const local = new Intl.DateTimeFormat('en-US', {
    timeZone: 'America/New_York',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    hourCycle: 'h23',
  })
  const endsOn = (resetMs: number) => {
    const parts = local.formatToParts(Math.round((Date.now() + resetMs) / 60_000) * 60_000)
    const part = (type: string) => Number(parts.find((p) => p.type === type)!.value)
    return { day: part('day'), hour: part('hour'), minute: part('minute') }
  }
  const acme = (await api.consume('key:acme')).policies[1]!
  expect(acme).toMatchObject({ limit: 500_000, remaining: 499_999 })
  expect(endsOn(acme.resetMs)).toEqual({ day: 17, hour: 0, minute: 0 })
  const globex = (await api.consume('key:globex')).policies[1]!
  expect(globex).toMatchObject({ limit: 1000, remaining: 999 })
  expect(endsOn(globex.resetMs)).toEqual({ day: 3, hour: 0, minute: 0 })
  expect((await tollgate('override', 'get', 'key:globex', ...prefix, ...url)).stdout).toBe(
    'key:globex: monthly=@3\n',
  )
  const json = JSON.parse((await tollgate('override', 'get', 'key:acme', ...prefix, '--json', ...url)).stdout)
  expect(json).toEqual({ monthly: { limit: 500000, billingDay: 17 } })
  // a billing day belongs to a calendar month: refused, with the argument named, before Redis
  const bad = await tollgate('override', 'set', 'key:x', 'rate=5@17', ...prefix, ...policies, ...url)
  expect(bad.code).not.toBe(0)
  expect(bad.stderr).toContain('billingDay')
  expect((await tollgate('override', 'get', 'key:x', ...prefix, ...url)).stdout).toBe('key:x: no override\n')
})

it("a pattern: override set 'tenant:acme:*' applies to every key of the tenant", async () => {
  const url = ['--url', server.url]
  const api = new RateLimiter({ store: new RedisStore(client), prefix: 'ovp', limit: 5, window: '1h' })
  const described = ['--prefix', 'ovp', '--limit', '5', '--window', '1h']
  expect((await api.consume('tenant:acme:k1')).limit).toBe(5)
  const set = await tollgate('override', 'set', 'tenant:acme:*', '50', ...described, ...url)
  expect(set).toMatchObject({
    code: 0,
    stdout: "tenant:acme:*: 50 (no end), applied on every process's next call\n",
  })
  expect((await api.consume('tenant:acme:k2')).limit).toBe(50)
  expect((await api.consume('tenant:beta:k1')).limit).toBe(5)
  expect((await tollgate('override', 'get', 'tenant:acme:*', '--prefix', 'ovp', ...url)).stdout).toBe(
    'tenant:acme:*: 50\n',
  )
  expect((await tollgate('override', 'list', '--prefix', 'ovp', ...url)).stdout).toMatch(
    /^tenant:acme:\*\s+50\s+no end$/m,
  )
  expect((await tollgate('override', 'rm', 'tenant:acme:*', '--prefix', 'ovp', ...url)).code).toBe(0)
  expect((await api.consume('tenant:acme:k3')).limit).toBe(5)
})

it('a one-policy limiter takes one limit', async () => {
  const api = new RateLimiter({ store: new RedisStore(client), prefix: 'ov1', limit: 5, window: '1h' })
  const out = await tollgate(
    'override',
    'set',
    'u',
    '50',
    '--prefix',
    'ov1',
    '--limit',
    '5',
    '--window',
    '1h',
    '--url',
    server.url,
  )
  expect(out.code).toBe(0)
  expect((await api.consume('u')).limit).toBe(50)
  expect(
    JSON.parse(
      (await tollgate('override', 'get', 'u', '--prefix', 'ov1', '--json', '--url', server.url)).stdout,
    ),
  ).toEqual({ limit: 50 })
})

it.each([
  [['override'], /expected set, get, list or rm/],
  [['override', 'set', 'k', 'monthly=5', '--prefix', 'ov'], /describe the limiter/],
  [['override', 'set', 'k', 'monthly=5', '--policy', 'monthly=1000'], /give policy monthly's window/],
  [['override', 'set', 'k', 'monthly:5', ...described], /is not <policy>=<limit>/],
  [['override', 'set', 'k', 'nope=5', ...described], /limits\.nope must be a policy name of this limiter/],
  [['override', 'set', 'k', 'monthly=0', ...described], /limits\.monthly\.limit must be a positive integer/],
  [['override', 'set', 'k', 'monthly=5', '--ttl', 'soon', ...described], /--ttl soon/],
  [['override', 'get', 'k', '--ttl', '1d'], /--ttl goes with override set/],
  [['override', 'get'], /give an identity/],
  [['inspect', 'k', '--ttl', '1d'], /--ttl goes with override set/],
])('%j is a usage error, nothing written', async (args, message) => {
  const out = await tollgate(...args, '--url', server.url)
  expect(out.code).toBe(2)
  expect(out.stderr).toMatch(message)
  expect(await client.keys('ov:{k}*')).toEqual([])
})
