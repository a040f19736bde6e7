/**
 * `tollgate top` (its `run`, what the bin calls) against a real redis-server: a limiter refuses
 * identities, and the command lists them most refused first with their budget. Windows are an hour
 * long, so no period boundary falls between the refusals and the read.
 */
import { run } from '@tollgate/cli'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { at, clearOfBoundary, type RedisServerHandle, runCli, startRedisServer } from '@tollgate/testkit'
import { createClient } from 'redis'

async function tollgate(tty: boolean, ...args: string[]) {
  const { code, stdout, stderr } = await runCli(run, args, tty)
  return { code, stdout, stderr }
}

const rowsOf = (stdout: string) =>
  stdout
    .trimEnd()
    .split('\n')
    .map((l) => l.split(/ {2,}/))

describe('tollgate top', () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  let url: string
  beforeAll(async () => {
    server = await startRedisServer()
    url = server.url
    client = createClient({ url })
    client.on('error', () => {})
    await client.connect()
    await clearOfBoundary(3_600_000, 10_000)
    const api = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'api',
      policies: { burst: { limit: 2, window: '1h' }, day: { limit: 5, window: '1d' } },
    })
    for (let i = 0; i < 7; i++) await api.consume({ burst: 'user:1', day: 'user:1' })
    for (let i = 0; i < 4; i++) await api.consume({ burst: 'user:2', day: 'user:2' })
    for (let i = 0; i < 8; i++) await api.consume({ burst: `k:${i}`, day: 'user:3' })
    await api.top() // adds what it tallied to the top sets
  })
  afterAll(async () => {
    await client.quit()
    await server.stop()
  })

  it('lists the refused identities, most refused first, with the window from the key', async () => {
    const out = await tollgate(false, '--url', url, '--prefix', 'api', 'top')
    expect([out.code, out.stderr]).toEqual([0, ''])
    expect(rowsOf(out.stdout)).toEqual([
      ['POLICY', 'LIMIT/WINDOW', 'IDENTITY', 'REFUSED', 'REMAINING', 'RESET'],
      ['burst', '1h', 'user:1', '5', 'used 2', expect.any(String)],
      ['day', '1d', 'user:3', '3', 'used 5', expect.any(String)],
      ['burst', '1h', 'user:2', '2', 'used 2', expect.any(String)],
    ])
  })

  it('--json, --limit, and a described --policy give the remaining budget', async () => {
    const out = await tollgate(
      false,
      '--url',
      url,
      '--prefix',
      'api',
      '--policy',
      'burst=2/1h',
      '--policy',
      'burst',
      '--limit',
      '1',
      '--json',
      'top',
    )
    expect(out.code).toBe(0)
    const doc = JSON.parse(out.stdout) as { top: Array<{ retryAfterMs: number }> }
    expect(doc.top).toEqual([
      expect.objectContaining({ policy: 'burst', identity: 'user:1', refused: 5, limit: 2, remaining: 0 }),
    ])
    expect(at(doc.top, 0).retryAfterMs).toBeGreaterThan(0)
  })

  it('--watch redraws its own lines on a terminal, and prints a table per interval elsewhere', async () => {
    const args = ['--url', url, '--prefix', 'api', '--policy', 'day', 'top', '--watch']
    const tty = await tollgate(true, ...args, '--count', '2', '--interval', '100ms')
    expect(tty.code).toBe(0)
    const lines = tty.stdout.trimEnd().split('\n')
    // header line + table header + one row, then the same three drawn over them
    expect(lines).toHaveLength(6)
    const redraw = at(lines, 3)
    expect(redraw.startsWith('\x1b[3F\x1b[J')).toBe(true)
    expect(redraw.slice(7)).toMatch(/^\d\d:\d\d:\d\d {2}top of 'api'$/)
    const piped = await tollgate(false, ...args, '--count', '2', '--interval', '100ms')
    expect(piped.stdout).not.toContain('\x1b')
    expect(piped.stdout.match(/^POLICY/gm)).toHaveLength(2)
  })

  it('a prefix with no refusals says so, and warns when it has no key at all (a typo)', async () => {
    const out = await tollgate(false, '--url', url, '--prefix', 'none', 'top')
    expect(out).toEqual({
      code: 0,
      stdout: "no refusals counted under prefix 'none' in the last two windows\n",
      stderr: expect.stringMatching(/warning: no key at all starts with 'none:'.*check --prefix/),
    })
  })

  it.each([
    [['--limit', '0'], /--limit 0: expected how many rows/],
    [['--limit', 'x'], /--limit x: expected how many rows/],
    [['--window', '1h'], /--limit is the number of rows/],
    [['--count', '2'], /--count goes with --watch/],
    [['--watch', '--interval', '1'], /--interval 1: expected a duration/],
    [['--policy', 'a b'], /--policy a b: expected a policy name/],
    [['extra'], /top: unexpected argument 'extra'/],
  ])('refuses %j with exit 2 and a clear message', async (flags, message) => {
    const out = await tollgate(false, '--url', url, 'top', ...flags)
    expect([out.code, out.stdout]).toEqual([2, ''])
    expect(out.stderr).toMatch(message)
  })

  it("reads compact counters' budget by the secret the prefix keeps in Redis", async () => {
    // another app's client: one client's stores refuse two limiters' policies under one prefix's rules
    const own = await client.duplicate().connect()
    const compact = new RateLimiter({
      store: new RedisStore(own, { storage: 'compact' }),
      prefix: 'capi',
      limit: 2,
      window: '1h',
      algorithm: 'fixed-window',
    })
    for (let i = 0; i < 5; i++) await compact.consume('user:9')
    await compact.top()
    await own.quit()
    const out = await tollgate(
      false,
      '--url',
      url,
      '--prefix',
      'capi',
      '--policy',
      'default=2/1h',
      '--json',
      'top',
    )
    expect([out.code, out.stderr]).toEqual([0, ''])
    expect(JSON.parse(out.stdout).top).toEqual([
      expect.objectContaining({ identity: 'user:9', refused: 3, limit: 2, remaining: 0 }),
    ])
  })

  it('--watch with another command is a usage error', async () => {
    const out = await tollgate(false, '--url', url, '--watch', 'inspect', 'user:1')
    expect([out.code, out.stderr]).toEqual([2, 'tollgate: --watch goes with top\n'])
  })
})
