/**
 * The `tollgate` bin, spawned as a process (node --import tsx bin/tollgate.mjs) against a real
 * redis-server, and `watch` against a live /metrics endpoint; then the same command in this process (its
 * `run`, what the bin calls) against a real 3-primary cluster from the testkit, where a spawn per step
 * would cost more than the cluster.
 * Windows are a day long (or gcra's slow refill), so no boundary falls between a spend and a read.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { run } from '@tollgate/cli'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import {
  at,
  freePort,
  type RedisClusterHandle,
  type RedisServerHandle,
  startRedisCluster,
  startRedisServer,
} from '@tollgate/testkit'
import { Registry } from 'prom-client'
import { createClient, createCluster } from 'redis'

// Each spawn pays tsx's start-up (seconds on a loaded 2-core machine).
jest.setTimeout(180_000)

const BIN = path.join(__dirname, '..', 'bin', 'tollgate.mjs')

function tollgate(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', BIN, ...args],
      { env: { ...process.env, REDIS_URL: '' }, timeout: 30_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
      },
    )
  })
}

/** What the bin would answer, from {@link run} in this process (with every option on its command line). */
async function inProcess(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = ''
  let stderr = ''
  const code = await run(args, {
    out: (line) => {
      stdout += `${line}\n`
    },
    err: (line) => {
      stderr += `${line}\n`
    },
  })
  return { code, stdout, stderr }
}

/** The rows of a table under its header, split on runs of two spaces or more. */
function rowsOf(stdout: string): string[][] {
  return stdout
    .trimEnd()
    .split('\n')
    .map((l) => l.split(/ {2,}/))
}

describe('tollgate (bin) against a redis-server', () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  let store: RedisStore
  beforeAll(async () => {
    server = await startRedisServer()
    client = createClient({ url: server.url })
    client.on('error', () => {})
    await client.connect()
    store = new RedisStore(client)
    const login = new RateLimiter({
      store,
      prefix: 'login',
      policies: {
        ip: { limit: 10, window: '1d' },
        account: { limit: 3, window: '1d', algorithm: 'fixed-window' },
      },
    })
    await login.consume({ ip: 'ip:1.2.3.4', account: 'email:a@b.c' }, { cost: 2 })
  })
  afterAll(async () => {
    await client.quit()
    await server.stop()
  })

  it('--help lists the commands; no command is a usage error', async () => {
    const help = await tollgate('--help')
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/inspect <identity>[\s\S]*reset <identity>[\s\S]*watch/)
    expect((await tollgate()).code).toBe(2)
    const bad = await tollgate('frobnicate')
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/unknown command 'frobnicate'/)])
  })

  it('--version, -v and version print the version of package.json', async () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8'))
    for (const args of [['--version'], ['-v'], ['version']]) {
      expect(await tollgate(...args)).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' })
    }
  })

  it('inspect without a limit prints what is stored, under a header row, and says what it cannot tell', async () => {
    const out = await tollgate(
      '--url',
      server.url,
      '--prefix',
      'login',
      'inspect',
      'ip=ip:1.2.3.4',
      'account=email:a@b.c',
    )
    expect(out.code).toBe(0)
    const rows = rowsOf(out.stdout)
    expect(rows[0]).toEqual(['POLICY', 'ALGORITHM', 'WINDOW', 'USED', 'RESET', 'KEY'])
    expect(rows.slice(1).map((r) => [r[0], r[1], r[2], r[3], r[5]])).toEqual([
      ['ip', 'sliding-window', '1d', '2', 'login:{ip:1.2.3.4}:ip:sw-1d'],
      ['account', 'fixed-window', '1d', '2', 'login:{email:a@b.c}:account:fw-1d'],
    ])
    // a human duration: no '1456.0s'
    expect(at(rows, 2)[4]).toMatch(/^(\d+h)?(\d+m)?(\d+s)?$/)
    expect(out.stderr).toMatch(/remaining cannot be told without the limit/)
  })

  it('inspect with the limits prints remaining per policy without spending (twice: same numbers)', async () => {
    const args = [
      '--url',
      server.url,
      '--prefix',
      'login',
      '--policy',
      'ip=10',
      '--policy',
      'account=3/1d/fixed-window',
    ]
    const who = ['ip=ip:1.2.3.4', 'account=email:a@b.c']
    const first = await tollgate(...args, '--json', 'inspect', ...who)
    expect(first.stderr).toBe('')
    const parsed = JSON.parse(first.stdout)
    expect(parsed.stored).toBe(true)
    expect(parsed.policies.map((p: any) => [p.policy, p.remaining, p.limit, p.used])).toEqual([
      ['ip', 8, 10, 2],
      ['account', 1, 3, 2],
    ])
    expect(parsed.policies[1].resetMs).toBeGreaterThan(0)
    const again = JSON.parse((await tollgate(...args, '--json', 'inspect', ...who)).stdout)
    expect(again.policies.map((p: any) => p.remaining)).toEqual([8, 1])
    const text = rowsOf((await tollgate(...args, 'inspect', ...who)).stdout)
    expect(text[0]).toEqual([
      'POLICY',
      'ALGORITHM',
      'WINDOW',
      'USED',
      'REMAINING',
      'RESET',
      'RETRY-AFTER',
      'KEY',
    ])
    expect(at(text, 2).slice(0, 5)).toEqual(['account', 'fixed-window', '1d', '2', '1/3'])
  })

  it('inspect trusts the stored key over a wrong --algorithm or --window, and warns on stderr', async () => {
    const api = new RateLimiter({ store, prefix: 'sw', limit: 10, window: '1d' })
    await api.consume('user:7', { cost: 4 })
    const out = await tollgate(
      '--url',
      server.url,
      '--prefix',
      'sw',
      '--limit',
      '10',
      '--algorithm',
      'fixed-window',
      '--window',
      '1h',
      '--json',
      'inspect',
      'user:7',
    )
    expect(out.code).toBe(0)
    expect(out.stderr).toMatch(
      /warning: .*fixed-window per 1h, but the stored key sw:\{user:7\}:sw-1d is sliding-window per 1d: reading it as stored/,
    )
    const [p] = JSON.parse(out.stdout).policies
    expect([p.algorithm, p.windowMs, p.remaining, p.limit]).toEqual(['sliding-window', 86_400_000, 6, 10])
    // gcra without a limit: the time until full, and no used count it cannot know
    const gcra = new RateLimiter({ store, prefix: 'gc', limit: 10, window: '1d', algorithm: 'gcra' })
    await gcra.consume('u', { cost: 4 })
    const bare = JSON.parse(
      (await tollgate('--url', server.url, '--prefix', 'gc', '--json', 'inspect', 'u')).stdout,
    )
    expect(bare.policies[0].used).toBeUndefined()
    expect(bare.policies[0].resetMs).toBeGreaterThan(3 * 8_640_000)
    const limited = JSON.parse(
      (await tollgate('--url', server.url, '--prefix', 'gc', '--limit', '10', '--json', 'inspect', 'u'))
        .stdout,
    )
    expect([limited.policies[0].used, limited.policies[0].remaining]).toEqual([4, 6])
  })

  it('an identity with no state says so, not a full quota (exit 0), and an unknown prefix is warned about', async () => {
    const none = await tollgate(
      '--url',
      server.url,
      '--prefix',
      'login',
      '--policy',
      'ip=10/1d',
      'inspect',
      'ip=ip:9.9.9.9',
    )
    expect([none.code, none.stdout.trim(), none.stderr]).toEqual([
      0,
      "no state stored for 'ip=ip:9.9.9.9' under prefix 'login'",
      '',
    ])
    const json = JSON.parse(
      (await tollgate('--url', server.url, '--json', '--prefix', 'login', 'inspect', 'nobody')).stdout,
    )
    expect([json.stored, json.policies]).toEqual([false, []])
    const typo = await tollgate('--url', server.url, '--prefix', 'logni', 'inspect', 'ip:1.2.3.4')
    expect([typo.code, typo.stdout]).toEqual([0, expect.stringMatching(/no state stored/)])
    expect(typo.stderr).toMatch(/no key at all starts with 'logni:'/)
  })

  it('reset needs no limiter: it deletes pair keys, penalty state and refund markers, and counts them', async () => {
    const locked = new RateLimiter({
      store,
      prefix: 'lock',
      policies: {
        account: { limit: 1, window: '1d', algorithm: 'fixed-window', penalty: { after: 1, block: '1h' } },
      },
    })
    await locked.attempt({ account: 'user:1' }, async (a) => a.refund()) // a refund marker
    await locked.consume({ account: 'user:1' })
    await locked.consume({ account: 'user:1' }) // refused: starts a block (penalty state)
    await locked.consume({ account: 'user:2' })
    const before = (await client.keys('lock:{user:1}:*')).sort()
    expect(before.length).toBe(3)
    const out = await tollgate('--url', server.url, '--prefix', 'lock', '--json', 'reset', 'user:1')
    expect(out.code).toBe(0)
    expect(JSON.parse(out.stdout)).toEqual(expect.objectContaining({ removed: 3, keys: before }))
    expect(await client.keys('lock:{user:1}:*')).toEqual([])
    expect(await client.keys('lock:{user:2}:*')).toEqual(['lock:{user:2}:account:fw-1d'])
    const text = await tollgate('--url', server.url, '--prefix', 'lock', 'reset', 'user:2')
    expect([text.code, text.stdout.trim()]).toEqual([0, "removed 1 key of 'user:2'"])
    const again = await tollgate('--url', server.url, '--prefix', 'lock', 'reset', 'user:2')
    expect([again.code, again.stdout.trim()]).toEqual([
      0,
      "no state stored for 'user:2' under prefix 'lock': nothing to reset",
    ])
  })

  it("with the store's secret, inspect reads compact counters and reset gives them back to 0", async () => {
    const secret = 'cli-compact-secret-0123'
    const api = new RateLimiter({
      store: new RedisStore(client, { storage: 'compact', secret }),
      prefix: 'capi',
      policies: {
        minute: { limit: 10, window: '1d', algorithm: 'fixed-window' },
        day: { limit: 100, window: '1d' },
      },
    })
    await api.consume('user:7', { cost: 3 })
    await api.consume('user:8')
    const at = ['--url', server.url, '--prefix', 'capi']
    // without the secret the counters are fields of buckets no name leads to: it asks for the secret
    const asks =
      "prefix 'capi' holds compact counters (storage: 'compact'), which only the store's secret finds: " +
      'give --secret <secret> or set $TOLLGATE_SECRET'
    for (const command of ['inspect', 'reset']) {
      const blind = await tollgate(...at, '--json', command, 'user:7')
      expect([blind.code, blind.stdout, blind.stderr.trim()]).toEqual([
        1,
        '',
        `tollgate: no key of its own for 'user:7', but ${asks}`,
      ])
    }
    // a key of its own is read, and the compact counters are said to be left unread; the key comes from
    // another app on the prefix, so from a client of its own (one client's stores refuse the clash)
    const otherApp = createClient({ url: server.url })
    otherApp.on('error', () => {})
    await otherApp.connect()
    await new RateLimiter({
      store: new RedisStore(otherApp),
      prefix: 'capi',
      limit: 5,
      window: '1d',
      algorithm: 'gcra',
    }).consume('gcra:9')
    await otherApp.quit()
    const partly = await tollgate(...at, 'inspect', 'gcra:9')
    expect(partly.code).toBe(0)
    expect(partly.stdout).toMatch(/gcra/)
    expect(partly.stderr).toContain(`note: ${asks} (not read)`)
    const limits = ['--policy', 'minute=10/1d/fixed-window', '--policy', 'day=100/1d']
    const seen = await tollgate(...at, '--secret', secret, ...limits, '--json', 'inspect', 'user:7')
    expect(seen.stderr).toBe('')
    const policies = JSON.parse(seen.stdout).policies
    expect(policies.map((p: any) => [p.policy, p.used, p.remaining])).toEqual([
      ['day', 3, 97],
      ['minute', 3, 7],
    ])
    expect(policies[0].key).toMatch(/^capi:\{~h:c\d+\}:day:sw-1d field [A-Za-z0-9_-]{9}$/)
    const out = await tollgate(...at, '--json', 'reset', 'user:7', '--secret', secret)
    expect(JSON.parse(out.stdout)).toMatchObject({ removed: 0, zeroed: 2 })
    expect((await api.peek('user:7')).remaining).toBe(10)
    expect((await api.peek('user:8')).remaining).toBe(9)
    const text = await tollgate(...at, '--secret', secret, 'reset', 'user:8')
    expect(text.stdout.trim()).toBe("reset 2 compact counters of 'user:8'")
    expect((await api.peek('user:8')).remaining).toBe(10)
    const short = await tollgate(...at, '--secret', 'short', 'inspect', 'user:7')
    expect([short.code, short.stderr.trim()]).toEqual([
      2,
      "tollgate: --secret: the store's secret is at least 16 characters (given: 5)",
    ])
  })

  it('without --secret, inspect and reset find compact counters by the secret the prefix keeps in Redis', async () => {
    // the app's store is given no secret: the prefix's is generated once and kept at kapi:{~h:s}
    const api = new RateLimiter({
      store: new RedisStore(client, { storage: 'compact' }),
      prefix: 'kapi',
      limit: 10,
      window: '1d',
      algorithm: 'fixed-window',
    })
    await api.consume('user:1', { cost: 4 })
    await api.consume('user:2')
    expect(String(await client.get('kapi:{~h:s}'))).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const at = ['--url', server.url, '--prefix', 'kapi']
    const seen = await tollgate(...at, '--limit', '10', '--window', '1d', '--json', 'inspect', 'user:1')
    expect([seen.code, seen.stderr]).toEqual([0, ''])
    const [policy] = JSON.parse(seen.stdout).policies
    expect([policy.used, policy.remaining]).toEqual([4, 6])
    expect(policy.key).toMatch(/^kapi:\{~h:c\d+\}:fw-1d field [A-Za-z0-9_-]{9}$/)
    // the same secret given, copied from Redis, reads the same (`=`: a kept secret may start with '-')
    const copied = await tollgate(
      ...at,
      `--secret=${await client.get('kapi:{~h:s}')}`,
      '--limit',
      '10',
      'inspect',
      'user:2',
    )
    expect([copied.code, copied.stderr, copied.stdout]).toEqual([0, '', expect.stringMatching(/kapi:\{~h:c/)])
    const out = await tollgate(...at, '--json', 'reset', 'user:1')
    expect(JSON.parse(out.stdout)).toMatchObject({ removed: 0, zeroed: 1 })
    expect((await api.peek('user:1')).remaining).toBe(10)
    expect((await api.peek('user:2')).remaining).toBe(9) // the other identity in the prefix keeps its count
    // a configured secret's fingerprint in that key finds nothing: the CLI still asks for the secret
    await client.set('fpapi:{~h:s}', '0123456789abcdef')
    await client.hSet('fpapi:{~h:c1}:fw-1d', 'x', '1')
    const asks = await tollgate('--url', server.url, '--prefix', 'fpapi', 'inspect', 'user:1')
    expect([asks.code, asks.stderr]).toEqual([1, expect.stringContaining('give --secret <secret>')])
  })

  it('a config module gives the prefix and the limits; reset accepts it and forgets one identity only', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-cli-'))
    const config = path.join(dir, 'limits.mjs')
    fs.writeFileSync(config, "export default { prefix: 'api', limit: 5, window: '1d' }\n")
    const api = new RateLimiter({ store, prefix: 'api', limit: 5, window: '1d' })
    await api.consume('user:1', { cost: 3 })
    await api.consume('user:2', { cost: 1 })
    const inspect = async (id: string) =>
      JSON.parse((await tollgate('--url', server.url, '--config', config, '--json', 'inspect', id)).stdout)
        .policies[0]?.remaining
    expect(await inspect('user:1')).toBe(2)
    const reset = await tollgate('--url', server.url, '--config', config, 'reset', 'user:1')
    expect([reset.code, reset.stdout.trim()]).toEqual([0, "removed 1 key of 'user:1'"])
    expect(await inspect('user:1')).toBeUndefined()
    expect(await inspect('user:2')).toBe(4)
    fs.rmSync(dir, { recursive: true })
  })

  it('clear errors: a bad URL, an unreachable server, a bad limit, --cluster on a single node', async () => {
    const base = ['--limit', '5', '--window', '1m', 'inspect', 'x']
    const notUrl = await tollgate('--url', 'localhost:6379', ...base)
    expect([notUrl.code, notUrl.stderr]).toEqual([
      2,
      expect.stringMatching(/redis:\/\/ or rediss:\/\/ scheme/),
    ])
    const garbage = await tollgate('--url', 'redis://exa mple', ...base)
    expect([garbage.code, garbage.stderr]).toEqual([2, expect.stringMatching(/is not a URL/)])
    const port = await freePort()
    const down = await tollgate('--url', `redis://127.0.0.1:${port}`, ...base)
    expect([down.code, down.stderr]).toEqual([1, expect.stringMatching(/cannot connect to .*ECONNREFUSED/)])
    const badLimit = await tollgate('--url', server.url, '--limit', 'ten', 'inspect', 'x')
    expect([badLimit.code, badLimit.stderr]).toEqual([
      2,
      expect.stringMatching(/--limit ten: expected a positive integer/),
    ])
    const asCluster = await tollgate('--url', server.url, '--cluster', ...base)
    expect([asCluster.code, asCluster.stderr]).toEqual([2, expect.stringMatching(/not a cluster node/)])
  })

  it('watch --count 4 prints a header and exactly 4 rows, refusals per limiter and policy', async () => {
    const registry = new Registry()
    const metrics = collectTollgateMetrics({ registry })
    const web = http.createServer(async (_req, res) => {
      res.setHeader('content-type', registry.contentType)
      res.end(await registry.metrics())
    })
    await new Promise<void>((r) => web.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(web.address() as { port: number }).port}/metrics`
    const api = new RateLimiter({ store, name: 'api', prefix: 'watch', limit: 1, window: '1d' })
    try {
      await api.consume('hot')
      // Refusals keep coming while the watcher samples (or not, in some interval: a row all the same).
      let stop = false
      const traffic = (async () => {
        while (!stop) {
          await api.consume('hot')
          await new Promise((r) => setTimeout(r, 20))
        }
      })()
      const flags = ['watch', '--metrics', url, '--limiter', 'api', '--interval', '300ms', '--count', '4']
      const [text, json] = await Promise.all([tollgate(...flags), tollgate(...flags, '--json')])
      stop = true
      await traffic
      expect([text.code, text.stderr]).toEqual([0, ''])
      const rows = rowsOf(text.stdout)
      expect(rows.length).toBe(5)
      expect(rows[0]).toEqual(['TIME', 'LIMITER', 'POLICY', 'ALLOWED', 'REFUSED', 'SHADOW-REFUSED'])
      for (const r of rows.slice(1)) {
        expect(r).toEqual([
          expect.stringMatching(/^\d\d:\d\d:\d\d$/),
          'api',
          'default',
          '0',
          expect.stringMatching(/^\d+$/),
          '0',
        ])
      }
      const lines = json.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(lines.length).toBe(4)
      expect(lines.every((l) => l.limiter === 'api' && l.policy === 'default' && l.intervalMs === 300)).toBe(
        true,
      )
      expect(lines.reduce((n, l) => n + l.refused, 0)).toBeGreaterThan(0)
      const bad = await tollgate('watch')
      expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/--metrics <url>/)])
      const badCount = await tollgate('watch', '--metrics', url, '--count', '1.5')
      expect([badCount.code, badCount.stderr]).toEqual([
        2,
        expect.stringMatching(/--count 1.5: expected a positive integer/),
      ])
    } finally {
      metrics.stop()
      web.close()
    }
  })

  it('watch keeps watching across a failed scrape, and shows no policy a series does not name', async () => {
    const registry = new Registry()
    const metrics = collectTollgateMetrics({ registry })
    let requests = 0
    // The second scrape (the first sample) fails, as an app restarting or a proxy hiccup would.
    const web = http.createServer(async (_req, res) => {
      if (++requests === 2) {
        res.statusCode = 503
        res.end('restarting')
        return
      }
      res.setHeader('content-type', registry.contentType)
      res.end(await registry.metrics())
    })
    await new Promise<void>((r) => web.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(web.address() as { port: number }).port}/metrics`
    // A Redis nobody listens on: its answers come from the failure policy, which the collectors also
    // count in `fallback_decisions_total` (no `policy` label).
    const down = createClient({ url: `redis://127.0.0.1:${await freePort()}` })
    down.on('error', () => {})
    down.connect().catch(() => {})
    const api = new RateLimiter({
      store: new RedisStore(down),
      name: 'down-api',
      prefix: 'watch-down',
      limit: 5,
      window: '1d',
      onStoreError: 'allow',
    })
    try {
      expect((await api.consume('a')).source).toBe('fallback')
      expect(await registry.metrics()).toMatch(/fallback_decisions_total\{limiter="down-api"/)
      let stop = false
      const traffic = (async () => {
        while (!stop) {
          await api.consume('a')
          await new Promise((r) => setTimeout(r, 20))
        }
      })()
      const out = await inProcess(
        'watch',
        '--metrics',
        url,
        '--limiter',
        'down-api',
        '--interval',
        '200ms',
        '--count',
        '4',
      )
      stop = true
      await traffic
      expect(out.code).toBe(0)
      // one visible line for the failed scrape, and the watch went on
      expect(out.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(/^\d\d:\d\d:\d\d scrape failed: --metrics .*: HTTP 503$/),
      ])
      const rows = rowsOf(out.stdout)
      expect(rows[0]).toEqual(['TIME', 'LIMITER', 'POLICY', 'ALLOWED', 'REFUSED', 'SHADOW-REFUSED'])
      // three samples scraped (the failed one prints nothing), each one row: the limiter's own policy
      expect(rows.slice(1).map((r) => [r[1], r[2]])).toEqual([
        ['down-api', 'default'],
        ['down-api', 'default'],
        ['down-api', 'default'],
      ])
      expect(out.stdout).not.toMatch(/undefined/)
      // nothing to scrape at all: every sample a line on stderr, and exit code 1
      const nowhere = `http://127.0.0.1:${await freePort()}/metrics`
      const none = await inProcess('watch', '--metrics', nowhere, '--interval', '100ms', '--count', '2')
      expect(none.code).toBe(1)
      expect(none.stdout).toBe('')
      expect(none.stderr.trim().split('\n')).toHaveLength(3)
      expect(none.stderr).toMatch(/scrape failed: --metrics .*ECONNREFUSED/)
    } finally {
      metrics.stop()
      web.close()
      await down.disconnect().catch(() => {})
    }
  })
})

describe('tollgate (run in process) against a 3-primary cluster', () => {
  let cluster: RedisClusterHandle
  let client: ReturnType<typeof createCluster>
  beforeAll(async () => {
    cluster = await startRedisCluster()
    client = createCluster({ rootNodes: cluster.rootNodes })
    client.on('error', () => {})
    await client.connect()
  }, 60_000)
  afterAll(async () => {
    await client?.quit()
    await cluster?.stop()
  })

  it('inspect and reset identities whose keys live on different primaries, with no limiter given', async () => {
    const limiter = new RateLimiter({ store: new RedisStore(client), prefix: 'c', limit: 5, window: '1d' })
    const ids = Array.from({ length: 12 }, (_, i) => `user:${i}`)
    for (const id of ids) await limiter.consume(id, { cost: 2 })
    const url = at(cluster.rootNodes, 1).url
    const args = ['--url', url, '--cluster', '--prefix', 'c', '--json']
    for (const id of ids.slice(0, 4)) {
      const out = await inProcess(...args, '--limit', '5', 'inspect', id)
      expect([out.stderr, JSON.parse(out.stdout).policies[0].remaining]).toEqual(['', 3])
    }
    const used = JSON.parse((await inProcess(...args, 'inspect', 'user:5')).stdout).policies[0]
    expect([used.used, used.key]).toEqual([2, 'c:{user:5}:sw-1d'])
    // one identity on each primary: the CLI must find every key on the node that owns its slot
    const primaryOf = async (id: string) => {
      const slot = Number(await client.sendCommand(undefined, true, ['CLUSTER', 'KEYSLOT', `c:{${id}}`]))
      return at(client.slots, slot).master.address
    }
    const byPrimary = new Map<string, string>()
    for (const id of ids.slice(3))
      byPrimary.set(await primaryOf(id), byPrimary.get(await primaryOf(id)) ?? id)
    const spread = ['user:3', ...[...byPrimary.values()].filter((id) => id !== 'user:3')]
    expect(new Set(await Promise.all(spread.map(primaryOf))).size).toBeGreaterThan(1)
    for (const id of spread) {
      expect(JSON.parse((await inProcess(...args, 'reset', id)).stdout).removed).toBe(1)
    }
    expect(JSON.parse((await inProcess(...args, 'inspect', 'user:3')).stdout).stored).toBe(false)
    expect(JSON.parse((await inProcess(...args, 'reset', 'user:3')).stdout).removed).toBe(0)
    // the others keep their state
    for (const id of ids.filter((i) => !spread.includes(i)))
      expect((await limiter.peek(id)).remaining).toBe(3)
    // compact counters, in buckets on other primaries than the identities' own keys
    const secret = 'cli-cluster-secret-0123'
    const compact = new RateLimiter({
      store: new RedisStore(client, { storage: 'compact', secret }),
      prefix: 'cc',
      limit: 5,
      window: '1d',
    })
    for (const id of ids.slice(0, 6)) await compact.consume(id, { cost: 2 })
    for (const id of ids.slice(0, 6)) {
      const at = ['--url', url, '--cluster', '--prefix', 'cc', '--secret', secret, '--json']
      const seen = JSON.parse((await inProcess(...at, '--limit', '5', 'inspect', id)).stdout).policies[0]
      expect([seen.used, seen.remaining]).toEqual([2, 3])
      expect(JSON.parse((await inProcess(...at, 'reset', id)).stdout).zeroed).toBe(1)
      expect((await compact.peek(id)).remaining).toBe(5)
    }
    const single = await inProcess('--url', url, '--prefix', 'c', 'inspect', 'user:1')
    expect([single.code, single.stderr]).toEqual([
      2,
      expect.stringMatching(/is a node of a Redis Cluster: add --cluster/),
    ])
  })
})
