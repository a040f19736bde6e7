/**
 * Overrides and blocks set by another OS process are applied by this one on its next call: the change
 * lives in Redis and the decision script reads it, so no process has to hear of it. This process keeps
 * its deny cache off, so each call shows what Redis decides now.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { redisUrl } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { createClient } from 'redis'
import { RateLimiter, RedisStore } from '../src'

const FIXTURE = join(__dirname, 'fixtures/control-process.ts')
const other = (prefix: string, op: string, identity: string) =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', FIXTURE, redisUrl(), prefix, op, identity], {
    cwd: __dirname,
  })

const client = createClient({ url: redisUrl() })
beforeAll(() => client.connect())
afterAll(() => client.quit())

it('an override and a block set in another process apply to this one on its next call', async () => {
  const prefix = uniquePrefix('ctlproc')
  const api = new RateLimiter({
    store: new RedisStore(client),
    prefix,
    denyCache: false,
    policies: { rate: { limit: 5, window: '1h' }, monthly: { limit: 3, window: { calendar: 'month' } } },
  })
  for (let i = 0; i < 3; i++) expect((await api.consume('tenant:acme')).allowed).toBe(true)
  expect((await api.consume('tenant:acme')).allowed).toBe(false)

  await other(prefix, 'override', 'tenant:acme')
  const raised = await api.consume('tenant:acme')
  expect(raised).toMatchObject({ allowed: true })
  expect(raised.policies[1]).toMatchObject({ limit: 50, remaining: 46 })

  await other(prefix, 'block', 'tenant:acme')
  expect(await api.consume('tenant:acme')).toMatchObject({ allowed: false, source: 'block' })
  await other(prefix, 'unblock', 'tenant:acme')
  await other(prefix, 'unoverride', 'tenant:acme')
  expect(await api.consume('tenant:acme')).toMatchObject({ allowed: false, source: 'store', limit: 3 })
}, 60_000)
