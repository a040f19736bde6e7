/**
 * The dashboard's server without a browser: where it may listen, its token, and its JSON endpoints
 * against a real redis-server.
 */
import { execFileSync } from 'node:child_process'
import http from 'node:http'
import path from 'node:path'
import { type Dashboard, run, startDashboard } from '@tollgate/cli'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import { createClient } from 'redis'

const TOKEN = 'a-dashboard-token-0123'
const quiet = { out: () => {}, err: () => {} }

describe('tollgate dashboard (server)', () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  let board: Dashboard
  beforeAll(async () => {
    server = await startRedisServer()
    client = createClient({ url: server.url })
    client.on('error', () => {})
    await client.connect()
    const api = new RateLimiter({ store: new RedisStore(client), prefix: 'web', limit: 1, window: '1h' })
    await api.consume('user:9', { cost: 1 })
    board = await startDashboard({ url: server.url, prefix: 'web', port: '0', token: TOKEN }, quiet)
  })
  afterAll(async () => {
    await board?.close()
    await client?.quit()
    await server?.stop()
  })

  it('refuses a non-loopback host without --token, and a short token (exit 2)', async () => {
    let err = ''
    const io = { out: () => {}, err: (l: string) => (err += l) }
    expect(await run(['--url', server.url, 'dashboard', '--host', '0.0.0.0'], io)).toBe(2)
    expect(err).toMatch(/--host 0.0.0.0 is not loopback: give --token/)
    expect(await run(['--url', server.url, 'dashboard', '--token', 'short'], io)).toBe(2)
    expect(await run(['--url', server.url, 'dashboard', '--port', '70000'], io)).toBe(2)
  })

  it('asks for the token on every request, the page included', async () => {
    for (const path of ['', 'api/top', 'api/policies']) {
      expect((await fetch(`${board.url}${path}`)).status).toBe(401)
      const wrong = await fetch(`${board.url}${path}`, { headers: { authorization: 'Bearer nope' } })
      expect(wrong.status).toBe(401)
    }
    expect((await fetch(`${board.url}?token=${TOKEN}`)).status).toBe(200)
  })

  it('without a token, answers only a loopback Host (no DNS rebinding)', async () => {
    const open = await startDashboard({ url: server.url, prefix: 'web', port: '0' }, quiet)
    try {
      expect((await fetch(open.url)).status).toBe(200)
      // fetch() keeps its own Host header: a raw request sends the one a rebound name would
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const req = http.get(`${open.url}api/top`, { headers: { host: 'evil.test:9464' } }, (res) => {
          res.resume()
          resolve(res.statusCode)
        })
        req.on('error', reject)
      })
      expect(status).toBe(403)
    } finally {
      await open.close()
    }
  })

  it('serves the policies, one identity and its reset', async () => {
    const get = async (path: string, init?: RequestInit) => {
      const res = await fetch(`${board.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${TOKEN}`, ...init?.headers },
      })
      return { status: res.status, body: (await res.json()) as any }
    }
    expect((await get('api/policies')).body.policies).toEqual([
      { policy: 'default', algorithm: 'sliding-window', windowMs: 3_600_000 },
    ])
    const state = await get('api/identity?identity=user:9')
    expect([state.body.stored, state.body.policies[0].used]).toEqual([true, 1])
    const post = (headers: Record<string, string>) =>
      get('api/reset', { method: 'POST', headers, body: JSON.stringify({ identity: 'user:9' }) })
    // what a form or another site's page could send: refused before any reset
    expect((await post({ 'content-type': 'text/plain' })).status).toBe(415)
    expect((await post({ 'content-type': 'application/json', origin: 'http://evil.test' })).status).toBe(403)
    const reset = await post({ 'content-type': 'application/json' })
    expect([reset.status, reset.body.removed]).toEqual([200, 1])
    expect((await get('api/identity?identity=user:9')).body.stored).toBe(false)
    const broken = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' }
    expect((await get('api/reset', broken)).status).toBe(400)
    expect((await get('api/rates')).body).toEqual(
      expect.objectContaining({ source: null, samples: [], hint: expect.stringMatching(/--metrics/) }),
    )
  })

  it('lists the live blocks, blocks and unblocks, with the same protections as reset', async () => {
    // no deny cache: this process's limiter answers every call from Redis, as another process would
    const web = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'web',
      limit: 1,
      window: '1h',
      denyCache: false,
    })
    const call = async (path: string, init?: RequestInit) => {
      const res = await fetch(`${board.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${TOKEN}`, ...init?.headers },
      })
      return { status: res.status, body: (await res.json()) as any }
    }
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      call(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      })
    const ip = '203.0.113.50'
    expect((await call('api/blocks')).body).toEqual({ prefix: 'web', blocks: [] })

    // refused before anything is written: another origin, an opaque one, a form's content type
    const entry = { identity: ip, for: '1h', reason: 'abuse' }
    expect((await post('api/block', entry, { origin: 'http://evil.test' })).status).toBe(403)
    expect((await post('api/block', entry, { origin: 'null' })).status).toBe(403)
    expect((await post('api/block', entry, { 'content-type': 'text/plain' })).status).toBe(415)
    const noToken = await fetch(`${board.url}api/block`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(entry),
    })
    expect(noToken.status).toBe(401)
    // bad input: 400 naming the field
    const bad: Array<[unknown, RegExp]> = [
      [{ for: '1h' }, /^identity: give an identity/],
      [{ identity: ip }, /^for: required/],
      [{ identity: ip, for: 'soon' }, /^for soon: expected a duration/],
      [{ identity: ip, for: '400d' }, /^for 400d: expected a duration from 1ms to 365d/],
      [{ identity: ip, for: 3600 }, /^for: expected a string/],
      [{ identity: ip, for: '1h', reason: 'r'.repeat(201) }, /^reason: at most 200 characters/],
    ]
    for (const [body, message] of bad) {
      const out = await post('api/block', body)
      expect([body, out.status, out.body.error]).toEqual([body, 400, expect.stringMatching(message)])
    }
    expect((await call('api/blocks')).body.blocks).toEqual([])
    expect((await web.consume(ip)).source).toBe('store')

    const blocked = await post('api/block', entry)
    expect(blocked).toEqual({
      status: 200,
      body: { prefix: 'web', identity: ip, blocked: true, forMs: 3_600_000, reason: 'abuse' },
    })
    const refused = await web.consume(ip)
    expect(refused).toMatchObject({ allowed: false, source: 'block' })
    expect(refused.retryAfterMs).toBeGreaterThan(3_600_000 - 60_000)
    const listed = (await call('api/blocks')).body.blocks
    expect(listed).toEqual([{ identity: ip, reason: 'abuse', expiresInMs: expect.any(Number) }])
    expect((await call('api/blocks?limit=0')).status).toBe(400)

    expect((await post('api/unblock', { identity: ip }, { origin: 'http://evil.test' })).status).toBe(403)
    expect((await post('api/unblock', {})).status).toBe(400)
    const unblocked = await post('api/unblock', { identity: ip })
    expect(unblocked.body).toEqual({ prefix: 'web', identity: ip, blocked: false, wasBlocked: true })
    expect((await call('api/blocks')).body.blocks).toEqual([])
    // decided by the store again: its one unit went before the block
    expect(await web.consume(ip)).toMatchObject({ allowed: false, source: 'store' })
    expect((await post('api/unblock', { identity: ip })).body.wasBlocked).toBe(false)
  })

  it('lists overrides, sets one checked against the described policies, and removes it', async () => {
    const plans = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'plans',
      policies: { rate: { limit: 10, window: '1h' } },
      denyCache: false,
    })
    const described = await startDashboard(
      { url: server.url, prefix: 'plans', port: '0', token: TOKEN, policy: ['rate=10/1h'] },
      quiet,
    )
    try {
      const call = async (base: string, path: string, init?: RequestInit) => {
        const res = await fetch(`${base}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...init?.headers },
        })
        return { status: res.status, body: (await res.json()) as any }
      }
      const post = (base: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
        call(base, path, { method: 'POST', body: JSON.stringify(body), headers })
      expect((await call(described.url, 'api/overrides')).body).toEqual({
        prefix: 'plans',
        settable: true,
        overrides: [],
      })
      // the first dashboard has no description: it lists, but cannot check a limit
      expect((await call(board.url, 'api/overrides')).body.settable).toBe(false)
      expect((await post(board.url, 'api/override', { identity: 'k', limit: 5 })).status).toBe(400)

      const entry = { identity: 'key:acme', policy: 'rate', limit: 50, ttl: '30d' }
      expect((await post(described.url, 'api/override', entry, { origin: 'http://evil.test' })).status).toBe(
        403,
      )
      const bad: Array<[unknown, RegExp]> = [
        [{ ...entry, policy: 'nope' }, /limits\.nope must be a policy name/],
        [{ ...entry, limit: 0 }, /limits\.rate\.limit must be a positive integer/],
        [{ ...entry, limit: '50' }, /^limit: expected an integer/],
        [{ ...entry, ttl: 'soon' }, /^ttl soon/],
        [{ ...entry, policy: undefined }, /^policy: name the policy/],
        [{ ...entry, identity: '' }, /^identity: give an identity/],
      ]
      for (const [body, message] of bad) {
        const out = await post(described.url, 'api/override', body)
        expect([body, out.status, out.body.error]).toEqual([body, 400, expect.stringMatching(message)])
      }
      expect((await call(described.url, 'api/overrides')).body.overrides).toEqual([])

      expect((await post(described.url, 'api/override', entry)).body).toEqual({
        prefix: 'plans',
        identity: 'key:acme',
        limits: { rate: { limit: 50 } },
      })
      expect((await plans.consume('key:acme')).limit).toBe(50)
      const listed = (await call(described.url, 'api/overrides')).body.overrides
      expect(listed).toEqual([
        {
          identity: 'key:acme',
          limits: { rate: { limit: 50 } },
          shown: 'rate=50',
          expiresInMs: expect.any(Number),
        },
      ])
      expect((await post(described.url, 'api/unoverride', { identity: 'key:acme' })).status).toBe(200)
      expect((await plans.consume('key:acme')).limit).toBe(10)
      expect((await call(described.url, 'api/overrides')).body.overrides).toEqual([])
    } finally {
      await described.close()
    }
  })

  it("sets a calendar month's billing day, alone or with a limit, and refuses one elsewhere", async () => {
    const described = await startDashboard(
      {
        url: server.url,
        prefix: 'billing',
        port: '0',
        token: TOKEN,
        policy: ['rate=10/1h', 'monthly=1000/month@Europe/Berlin'],
      },
      quiet,
    )
    try {
      const post = async (path: string, body: unknown) => {
        const res = await fetch(`${described.url}${path}`, {
          method: 'POST',
          body: JSON.stringify(body),
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        })
        return { status: res.status, body: (await res.json()) as any }
      }
      expect((await post('api/override', { identity: 'a', policy: 'monthly', billingDay: 17 })).body).toEqual(
        {
          prefix: 'billing',
          identity: 'a',
          limits: { monthly: { billingDay: 17 } },
        },
      )
      const both = await post('api/override', {
        identity: 'b',
        policy: 'monthly',
        limit: 5000,
        billingDay: 3,
      })
      expect(both.body.limits).toEqual({ monthly: { limit: 5000, billingDay: 3 } })
      // a pattern: every identity starting with 'tenant:acme:'
      const pattern = await post('api/override', { identity: 'tenant:acme:*', policy: 'rate', limit: 20 })
      expect(pattern.body.limits).toEqual({ rate: { limit: 20 } })
      const bad: Array<[unknown, RegExp]> = [
        [{ identity: 'c', policy: 'rate', billingDay: 17 }, /limits\.rate\.billingDay/],
        [{ identity: 'c', policy: 'monthly', billingDay: 32 }, /limits\.monthly\.billingDay/],
        [{ identity: 'c', policy: 'monthly', billingDay: '17' }, /^billingDay: expected an integer/],
        [{ identity: 'c', policy: 'monthly' }, /^limit: expected an integer \(or a billingDay\)/],
      ]
      for (const [body, message] of bad) {
        const out = await post('api/override', body)
        expect([body, out.status, out.body.error]).toEqual([body, 400, expect.stringMatching(message)])
      }
      const res = await fetch(`${described.url}api/overrides`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      })
      const shown = ((await res.json()) as any).overrides.map((o: any) => [o.identity, o.shown]).sort()
      expect(shown).toEqual([
        ['a', 'monthly=@17'],
        ['b', 'monthly=5000@3'],
        ['tenant:acme:*', 'rate=20'],
      ])
    } finally {
      await described.close()
    }
  })

  it('the published tarball ships the page', () => {
    const packed = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: path.join(__dirname, '..'),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    const [tarball] = JSON.parse(packed) as Array<{ files: Array<{ path: string }> }>
    expect(tarball?.files.map((f) => f.path)).toContain('static/dashboard.html')
  })
})
