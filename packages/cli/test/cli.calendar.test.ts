/**
 * `tollgate inspect` on calendar windows (run in process, against a real redis-server): the key's
 * signature names the period and zone, so it is read without a description, and `--policy
 * monthly=100/month@<zone>` describes one. The limits are far from spent and the period is a month, so
 * no boundary falls between the spend and the read that the numbers would show.
 */
import { run } from '@tollgate/cli'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import { createClient } from 'redis'

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

describe('tollgate inspect with calendar windows', () => {
  let server: RedisServerHandle
  let client: ReturnType<typeof createClient>
  beforeAll(async () => {
    server = await startRedisServer()
    client = createClient({ url: server.url })
    client.on('error', () => {})
    await client.connect()
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: 'cal',
      policies: {
        daily: { limit: 50, window: '1d' },
        monthly: { limit: 100, window: { calendar: 'month', timeZone: 'Europe/Berlin' } },
      },
    })
    await limiter.consume({ daily: 'acme', monthly: 'acme' }, { cost: 3 })
  }, 60_000)
  afterAll(async () => {
    await client?.quit()
    await server?.stop()
  })

  it('reads a calendar key from its name alone', async () => {
    const args = ['--url', server.url, '--prefix', 'cal', '--json']
    const stored = JSON.parse((await inProcess(...args, 'inspect', 'acme')).stdout).policies
    const monthly = stored.find((p: { policy: string }) => p.policy === 'monthly')
    expect([monthly.used, monthly.key, monthly.calendar]).toEqual([
      3,
      'cal:{acme}:monthly:cm-Europe/Berlin',
      { unit: 'month', timeZone: 'Europe/Berlin' },
    ])
  })

  it('shows month@<zone> and what is left with --policy monthly=100/month@<zone>', async () => {
    const args = ['--url', server.url, '--prefix', 'cal']
    const spec = ['--policy', 'daily=50/1d', '--policy', 'monthly=100/month@Europe/Berlin']
    const out = await inProcess(...args, ...spec, 'inspect', 'acme')
    expect(out.stderr).toBe('')
    const row = rowsOf(out.stdout).find((r) => r[0] === 'monthly')!
    expect(row.slice(0, 5)).toEqual(['monthly', 'fixed-window', 'month@Europe/Berlin', '3', '97/100'])
  })

  it('warns when the description names another zone, and reads the key as stored', async () => {
    const args = ['--url', server.url, '--prefix', 'cal']
    const spec = ['--policy', 'daily=50/1d', '--policy', 'monthly=100/month@UTC']
    const out = await inProcess(...args, ...spec, 'inspect', 'acme')
    expect(out.stderr).toMatch(/month@UTC.*month@Europe\/Berlin: reading it as stored/)
  })
})
