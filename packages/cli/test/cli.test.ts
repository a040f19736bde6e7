/**
 * The `tollgate` bin, spawned as a process (node --import tsx bin/tollgate.mjs) against a real
 * redis-server and a real 3-primary cluster from the testkit; `watch` against a live /metrics endpoint.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import { Registry } from 'prom-client'
import { createClient, createCluster } from 'redis'
import { type RedisClusterHandle, startRedisCluster } from '../../testkit/src/cluster'
import { freePort, type RedisServerHandle, startRedisServer } from '../../testkit/src/redis-server'

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

describe('tollgate (bin) against a redis-server', () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  let limiter: RateLimiter
  beforeAll(async () => {
    server = await startRedisServer()
    client = createClient({ url: server.url })
    client.on('error', () => {})
    await client.connect()
    limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'login',
      policies: {
        ip: { limit: 10, window: '15m' },
        // a day, not 15 minutes: a fixed window's boundary between this spend and the inspects below
        // would (rightly) show the account's budget whole again
        account: { limit: 3, window: '1d', algorithm: 'fixed-window' },
      },
    })
    await limiter.consume({ ip: 'ip:1.2.3.4', account: 'email:a@b.c' }, { cost: 2 })
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

  it('inspect shows remaining and reset per policy without spending (twice: same numbers)', async () => {
    const args = [
      '--url',
      server.url,
      '--prefix',
      'login',
      '--policy',
      'ip=10/15m',
      '--policy',
      'account=3/1d/fixed-window',
    ]
    const first = await tollgate(...args, '--json', 'inspect', 'ip=ip:1.2.3.4', 'account=email:a@b.c')
    expect(first.stderr).toBe('')
    const parsed = JSON.parse(first.stdout)
    expect(parsed.policies.map((p: any) => [p.policy, p.remaining, p.limit])).toEqual([
      ['ip', 8, 10],
      ['account', 1, 3],
    ])
    expect(parsed.policies[1].resetMs).toBeGreaterThan(0)
    const again = JSON.parse(
      (await tollgate(...args, '--json', 'inspect', 'ip=ip:1.2.3.4', 'account=email:a@b.c')).stdout,
    )
    expect(again.policies.map((p: any) => p.remaining)).toEqual([8, 1])
    const text = await tollgate(...args, 'inspect', 'ip=ip:1.2.3.4', 'account=email:a@b.c')
    expect(text.stdout).toMatch(/^account\tfixed-window\t1\/3\t/m)
  })

  it('inspect with the limiter from a config module; reset forgets one identity only', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-cli-'))
    const config = path.join(dir, 'limits.mjs')
    fs.writeFileSync(config, "export default { prefix: 'api', limit: 5, window: '1d' }\n")
    const api = new RateLimiter({ store: new RedisStore(client), prefix: 'api', limit: 5, window: '1d' })
    await api.consume('user:1', { cost: 3 })
    await api.consume('user:2', { cost: 1 })
    const inspect = async (id: string) =>
      JSON.parse((await tollgate('--url', server.url, '--config', config, '--json', 'inspect', id)).stdout)
        .policies[0].remaining
    expect(await inspect('user:1')).toBe(2)
    const reset = await tollgate('--url', server.url, '--config', config, 'reset', 'user:1')
    expect([reset.code, reset.stdout.trim()]).toEqual([0, 'reset api:{user:1}'])
    expect(await inspect('user:1')).toBe(5)
    expect(await inspect('user:2')).toBe(4)
    fs.rmSync(dir, { recursive: true })
  })

  it('clear errors: a bad URL, an unreachable server, an unknown prefix, a missing limiter', async () => {
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
    const unknown = await tollgate('--url', server.url, '--prefix', 'logni', ...base)
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringMatching(/unknown prefix 'logni'/)])
    const none = await tollgate('--url', server.url, 'inspect', 'x')
    expect([none.code, none.stderr]).toEqual([2, expect.stringMatching(/describe the limiter/)])
    const asCluster = await tollgate('--url', server.url, '--cluster', ...base)
    expect([asCluster.code, asCluster.stderr]).toEqual([2, expect.stringMatching(/not a cluster node/)])
  })

  it('watch prints refusals per limiter and policy from a /metrics endpoint', async () => {
    const registry = new Registry()
    const metrics = collectTollgateMetrics({ registry })
    const web = http.createServer(async (_req, res) => {
      res.setHeader('content-type', registry.contentType)
      res.end(await registry.metrics())
    })
    await new Promise<void>((r) => web.listen(0, '127.0.0.1', r))
    const url = `http://127.0.0.1:${(web.address() as { port: number }).port}/metrics`
    const api = new RateLimiter({
      store: new RedisStore(client),
      name: 'api',
      prefix: 'watch',
      limit: 1,
      window: '1m',
    })
    try {
      // Refusals keep coming while the watcher samples; it must report them against limiter and policy.
      let stop = false
      const traffic = (async () => {
        while (!stop) {
          await api.consume('hot')
          await new Promise((r) => setTimeout(r, 20))
        }
      })()
      const out = await tollgate(
        'watch',
        '--metrics',
        url,
        '--limiter',
        'api',
        '--interval',
        '300ms',
        '--count',
        '3',
        '--json',
      )
      stop = true
      await traffic
      expect(out.code).toBe(0)
      const lines = out.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(lines.length).toBe(3)
      expect(
        lines.every((l) => l.limiter === 'api' && l.policy === 'default' && l.outcome === 'refused'),
      ).toBe(true)
      expect(lines.reduce((n, l) => n + l.count, 0)).toBeGreaterThan(0)
      const bad = await tollgate('watch')
      expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/--metrics <url>/)])
    } finally {
      metrics.stop()
      web.close()
    }
  })
})

describe('tollgate (bin) against a 3-primary cluster', () => {
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

  it('inspect and reset identities whose keys live on different primaries; a cluster node without --cluster is an error', async () => {
    const limiter = new RateLimiter({ store: new RedisStore(client), prefix: 'c', limit: 5, window: '1d' })
    const ids = Array.from({ length: 12 }, (_, i) => `user:${i}`)
    for (const id of ids) await limiter.consume(id, { cost: 2 })
    const url = cluster.rootNodes[1].url
    const args = ['--url', url, '--cluster', '--prefix', 'c', '--limit', '5', '--window', '1d', '--json']
    for (const id of ids.slice(0, 4)) {
      const out = await tollgate(...args, 'inspect', id)
      expect([out.stderr, JSON.parse(out.stdout).policies[0].remaining]).toEqual(['', 3])
    }
    expect((await tollgate(...args, 'reset', 'user:3')).code).toBe(0)
    expect(JSON.parse((await tollgate(...args, 'inspect', 'user:3')).stdout).policies[0].remaining).toBe(5)
    expect((await limiter.peek('user:4')).remaining).toBe(3)
    const single = await tollgate(
      '--url',
      url,
      '--prefix',
      'c',
      '--limit',
      '5',
      '--window',
      '1m',
      'inspect',
      'user:1',
    )
    expect([single.code, single.stderr]).toEqual([
      2,
      expect.stringMatching(/is a node of a Redis Cluster: add --cluster/),
    ])
    const unknown = await tollgate(
      '--url',
      url,
      '--cluster',
      '--prefix',
      'nope',
      '--limit',
      '5',
      '--window',
      '1m',
      'inspect',
      'x',
    )
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringMatching(/unknown prefix 'nope'/)])
  })
})
