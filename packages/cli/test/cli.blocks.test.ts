/**
 * `tollgate block | unblock | blocks | allow | unallow`, spawned as a process (node --import tsx
 * bin/tollgate.mjs) against a real redis-server, while a limiter in this process decides calls: what the
 * command writes is what that limiter's next call sees. Bad input is refused before any connection (the
 * URL given then has no server behind it, so reaching Redis would be a different error, exit 1).
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { run } from '@tollgate/cli'
import { RateLimiter, RedisStore } from '@tollgate/core'
import {
  at,
  freePort,
  type RedisClusterHandle,
  type RedisServerHandle,
  startRedisCluster,
  startRedisServer,
} from '@tollgate/testkit'
import { createClient, createCluster } from 'redis'

// Each spawn pays tsx's start-up (seconds on a loaded 2-core machine).
jest.setTimeout(180_000)

const BIN = path.join(__dirname, '..', 'bin', 'tollgate.mjs')
const HOUR = 3_600_000

function tollgate(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', BIN, ...args],
      { env: { ...process.env, REDIS_URL: '', TOLLGATE_SECRET: '' }, timeout: 30_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr })
      },
    )
  })
}

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

describe('tollgate block, unblock, blocks, allow, unallow', () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  let api: RateLimiter
  beforeAll(async () => {
    server = await startRedisServer()
    client = createClient({ url: server.url })
    client.on('error', () => {})
    await client.connect()
    // No deny cache: a refusal it remembered may outlive another process's unblock by up to its maxMs
    // (docs/blocks.md); without it, every call below is answered from Redis.
    api = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'api',
      policies: { burst: { limit: 2, window: '1d' }, day: { limit: 5, window: '1d' } },
      denyCache: false,
    })
  })
  afterAll(async () => {
    await client.quit()
    await server.stop()
  })

  it('a block refuses the next call with its time left, blocks lists it, unblock admits again', async () => {
    const ip = '203.0.113.9'
    expect(await api.consume(ip)).toMatchObject({ allowed: true, remaining: 1 })
    const blocked = await tollgate(
      '--url',
      server.url,
      '--prefix',
      'api',
      'block',
      ip,
      '--for',
      '1h',
      '--reason',
      'credential stuffing',
    )
    expect(blocked).toEqual({
      code: 0,
      stdout: `blocked '${ip}' for 1h under prefix 'api' (credential stuffing)\n`,
      stderr: '',
    })

    const refused = await api.consume(ip)
    expect(refused).toMatchObject({ allowed: false, source: 'block' })
    expect(refused.retryAfterMs).toBeGreaterThan(HOUR - 60_000)
    expect(refused.retryAfterMs).toBeLessThanOrEqual(HOUR)
    expect((await api.consume('198.51.100.1')).allowed).toBe(true) // another identity is not touched

    await api.block('user:7', { for: '10m' })
    const text = await tollgate('--url', server.url, '--prefix', 'api', 'blocks')
    expect([text.code, text.stderr]).toEqual([0, ''])
    const rows = text.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split(/ {2,}/))
    expect(rows[0]).toEqual(['IDENTITY', 'EXPIRES-IN', 'REASON'])
    expect(rows.slice(1).map((r) => [r[0], r[2]])).toEqual([
      [ip, 'credential stuffing'],
      ['user:7', '-'],
    ])
    expect(rows[1]![1]).toMatch(/^(5\dm(\d+s)?|1h)$/)

    const json = await tollgate('--url', server.url, '--prefix', 'api', 'blocks', '--json')
    expect(json.code).toBe(0)
    const doc = JSON.parse(json.stdout)
    expect(doc).toEqual({
      prefix: 'api',
      blocks: [
        { identity: ip, reason: 'credential stuffing', expiresInMs: expect.any(Number) },
        { identity: 'user:7', reason: '', expiresInMs: expect.any(Number) },
      ],
    })
    expect(doc.blocks[0].expiresInMs).toBeGreaterThan(HOUR - 60_000)
    expect(doc.blocks[1].expiresInMs).toBeLessThanOrEqual(10 * 60_000)
    const one = await inProcess('--url', server.url, '--prefix', 'api', 'blocks', '--limit', '1', '--json')
    expect(JSON.parse(one.stdout).blocks).toHaveLength(1)

    const unblocked = await tollgate('--url', server.url, '--prefix', 'api', 'unblock', ip, '--json')
    expect(unblocked.code).toBe(0)
    expect(JSON.parse(unblocked.stdout)).toEqual({
      prefix: 'api',
      identity: ip,
      blocked: false,
      wasBlocked: true,
    })
    // the refusals spent nothing: the one spend before the block is all there is
    expect(await api.consume(ip)).toMatchObject({ allowed: true, source: 'store', remaining: 0 })
    expect(await api.blocks()).toEqual([expect.objectContaining({ identity: 'user:7' })])

    const again = await tollgate('--url', server.url, '--prefix', 'api', 'unblock', ip)
    expect(again).toEqual({
      code: 0,
      stdout: `'${ip}' was not blocked under prefix 'api': nothing to unblock\n`,
      stderr: '',
    })
  })

  it("reset forgets an identity's counters, not its entries: a blocked identity stays blocked", async () => {
    expect((await api.consume('user:9')).allowed).toBe(true)
    await api.block('user:9', { for: '1h' })
    const out = await inProcess('--url', server.url, '--prefix', 'api', '--json', 'reset', 'user:9')
    expect(JSON.parse(out.stdout)).toMatchObject({ removed: 2 }) // the two policies' counters
    expect((await api.consume('user:9')).source).toBe('block')
    await api.unblock('user:9')
    expect(await api.consume('user:9')).toMatchObject({ source: 'store', remaining: 1 }) // burst: 2 - 1
  })

  it('a block under another prefix does not touch this limiter', async () => {
    const out = await inProcess('--url', server.url, 'block', 'user:8', '--for', '1h')
    expect(out).toEqual({ code: 0, stdout: `blocked 'user:8' for 1h under prefix 'tollgate'\n`, stderr: '' })
    expect((await api.consume('user:8')).source).toBe('store')
    expect((await api.blocks()).map((b) => b.identity)).not.toContain('user:8')
  })

  it('an allow entry admits without spending; unallow ends it', async () => {
    const id = '10.0.0.5'
    for (let i = 0; i < 2; i++) expect((await api.consume(id)).allowed).toBe(true)
    expect(await api.consume(id)).toMatchObject({ allowed: false, source: 'store' })

    const allowed = await tollgate(
      '--url',
      server.url,
      '--prefix',
      'api',
      'allow',
      id,
      '--for',
      '1d',
      '--json',
    )
    expect(allowed.code).toBe(0)
    expect(JSON.parse(allowed.stdout)).toEqual({
      prefix: 'api',
      identity: id,
      allowed: true,
      forMs: 86_400_000,
    })
    for (let i = 0; i < 3; i++)
      expect(await api.consume(id)).toMatchObject({ allowed: true, source: 'allow' })

    const ended = await tollgate('--url', server.url, '--prefix', 'api', 'unallow', id)
    expect(ended).toEqual({
      code: 0,
      stdout: `ended any allow entry of '${id}' under prefix 'api'\n`,
      stderr: '',
    })
    expect(await api.consume(id)).toMatchObject({ allowed: false, source: 'store' })
  })

  it('the prefix can come from --config (its policies do not matter)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-cli-'))
    const config = path.join(dir, 'limits.mjs')
    fs.writeFileSync(
      config,
      "export default { prefix: 'api', policies: { ip: { limit: 9, window: '1m' } } }\n",
    )
    const out = await tollgate('--url', server.url, '--config', config, 'block', 'user:9', '--for', '5m')
    expect(out).toEqual({ code: 0, stdout: `blocked 'user:9' for 5m under prefix 'api'\n`, stderr: '' })
    expect((await api.consume('user:9')).source).toBe('block')
    await api.unblock('user:9')
    fs.rmSync(dir, { recursive: true })
  })

  it('bad input exits 2 naming the option, before connecting to Redis', async () => {
    const nowhere = `redis://127.0.0.1:${await freePort()}`
    // spawned: what an operator sees
    const noFor = await tollgate('--url', nowhere, 'block', '203.0.113.9')
    expect([noFor.code, noFor.stdout, noFor.stderr]).toEqual([
      2,
      '',
      'tollgate: --for: required, how long the entry lasts, e.g. --for 1h\n',
    ])
    const noIdentity = await tollgate('--url', nowhere, 'unblock')
    expect([noIdentity.code, noIdentity.stderr]).toEqual([
      2,
      expect.stringMatching(/^tollgate: unblock: give an identity/),
    ])

    const cases: Array<[string[], RegExp]> = [
      [['block', 'x', '--for', 'soon'], /--for soon: expected a duration/],
      [['block', 'x', '--for', '366d'], /--for 366d: expected a duration from 1ms to 365d/],
      [['block', 'x', '--for', '0s'], /--for 0s: expected a duration/],
      [['block', 'x', '--for', '60'], /--for 60: give a unit, e.g. 60s/],
      [['allow', 'x'], /--for: required/],
      [['allow', 'x', '--for', '1h', '--reason', 'r'], /--reason goes with block/],
      [['block', '', '--for', '1h'], /block: give an identity/],
      [['block', 'x'.repeat(1025), '--for', '1h'], /identity of at most 1024 characters/],
      [['block', 'x', '--for', '1h', '--reason', 'r'.repeat(201)], /--reason: at most 200 characters/],
      [['block', 'a', 'b', '--for', '1h'], /one identity per call/],
      [['unblock', 'x', '--for', '1h'], /--for goes with block and allow/],
      [['unallow'], /unallow: give an identity/],
      [['blocks', 'x'], /blocks: unexpected argument 'x'/],
      [['blocks', '--limit', '0'], /--limit 0: expected how many blocks, from 1 to 1000/],
      [['blocks', '--limit', '1001'], /--limit 1001/],
      [['block', 'x', '--for', '1h', '--limit', '5'], /--limit does not apply/],
      [['block', 'x', '--for', '1h', '--policy', 'ip=5/1m'], /--policy does not apply/],
      [['inspect', 'x', '--for', '1h'], /--for goes with block and allow/],
      [['top', '--reason', 'r'], /--reason goes with block/],
    ]
    for (const [args, message] of cases) {
      const out = await inProcess('--url', nowhere, ...args)
      expect([args, out.code, out.stdout, out.stderr]).toEqual([args, 2, '', expect.stringMatching(message)])
    }
    // well-formed input does reach for Redis: the same URL is an environment error, exit 1
    const reached = await inProcess('--url', nowhere, 'block', 'x', '--for', '1h')
    expect([reached.code, reached.stderr]).toEqual([1, expect.stringMatching(/cannot connect to/)])
  })

  it('--help lists the commands', async () => {
    const help = await inProcess('--help')
    expect(help.stdout).toMatch(/block <identity> --for <duration> \[--reason <text>\]/)
    for (const command of [
      'unblock <identity>',
      'blocks [--limit <n>]',
      'allow <identity> --for',
      'unallow <identity>',
    ])
      expect(help.stdout).toContain(command)
  })

  it('blocks shows control characters of an identity or reason escaped', async () => {
    await api.block('evil\x1b[2J', { for: '1h', reason: 'bell\x07' })
    const out = await inProcess('--url', server.url, '--prefix', 'api', 'blocks')
    expect(out.stdout).toContain('evil\\x1b[2J')
    expect(out.stdout).toContain('bell\\x07')
    expect(out.stdout.replaceAll('\n', '')).not.toMatch(/\p{Cc}/u)
    await api.unblock('evil\x1b[2J')
  })
})

describe('tollgate block, unblock, blocks (run in process) against a 3-primary cluster', () => {
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

  it('entries of identities on different primaries, and the index on its own, all apply', async () => {
    const api = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'c',
      limit: 5,
      window: '1d',
      denyCache: false,
    })
    const ids = Array.from({ length: 6 }, (_, i) => `user:${i}`)
    const primaryOf = async (id: string) => {
      const slot = Number(await client.sendCommand(undefined, true, ['CLUSTER', 'KEYSLOT', `c:{${id}}:~c`]))
      return at(client.slots, slot).master.address
    }
    expect(new Set(await Promise.all(ids.map(primaryOf))).size).toBeGreaterThan(1)
    const args = ['--url', at(cluster.rootNodes, 1).url, '--cluster', '--prefix', 'c']
    for (const id of ids) {
      const out = await inProcess(...args, 'block', id, '--for', '1h', '--reason', `r-${id}`)
      expect([out.code, out.stderr]).toEqual([0, ''])
    }
    for (const id of ids) expect((await api.consume(id)).source).toBe('block')
    const listed = JSON.parse((await inProcess(...args, 'blocks', '--json')).stdout).blocks
    expect(listed.map((b: { identity: string; reason: string }) => [b.identity, b.reason])).toEqual(
      ids.map((id) => [id, `r-${id}`]),
    )
    for (const id of ids) {
      const out = JSON.parse((await inProcess(...args, 'unblock', id, '--json')).stdout)
      expect(out.wasBlocked).toBe(true)
    }
    for (const id of ids) expect(await api.consume(id)).toMatchObject({ allowed: true, source: 'store' })
    expect((await inProcess(...args, 'allow', 'user:0', '--for', '1h')).code).toBe(0)
    expect((await api.consume('user:0')).source).toBe('allow')
  })

  it("storage: 'compact': an entry reaches the counters in its identity's bucket, whose slot is another", async () => {
    const api = new RateLimiter({
      store: new RedisStore(client, { storage: 'compact' }),
      prefix: 'cc',
      limit: 5,
      window: '1d',
      denyCache: false,
    })
    expect((await api.consume('user:1')).allowed).toBe(true) // the prefix's secret is kept in Redis now
    const args = ['--url', at(cluster.rootNodes, 1).url, '--cluster', '--prefix', 'cc']
    expect((await inProcess(...args, 'block', 'user:1', '--for', '1h')).code).toBe(0)
    expect((await api.consume('user:1')).source).toBe('block')
    expect((await inProcess(...args, 'unblock', 'user:1')).code).toBe(0)
    expect(await api.consume('user:1')).toMatchObject({ allowed: true, source: 'store', remaining: 3 })
    expect((await inProcess(...args, 'allow', 'user:2', '--for', '1h')).code).toBe(0)
    expect((await api.consume('user:2')).source).toBe('allow')
  })
})
