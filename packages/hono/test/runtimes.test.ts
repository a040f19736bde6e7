/**
 * The middleware on Bun and Deno, each with its own server (`Bun.serve`, `Deno.serve`) and Hono's
 * `getConnInfo` for that runtime, against the suite's Redis. Both runtimes come from npm through
 * `pnpm install:runtimes` (the binary ships inside a platform package), or `BUN_BIN` / `DENO_BIN`, or
 * `PATH`. Outside CI a runtime that is not installed is skipped, and says so; with `CI=true` it fails.
 */
import path from 'node:path'
import { describeOnRuntimes } from '@tollgate/testkit/runtime-server'

describeOnRuntimes(
  'rateLimiter on $name',
  'runtime',
  path.join(__dirname, 'fixtures/runtime-server.ts'),
  (name) => `keys on ${name}'s own connection info: 3 x 200, then 429 with headers; X-Forwarded-For ignored`,
  async (base) => {
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/limited`, { headers: { 'x-forwarded-for': `203.0.113.${i}` } })
      statuses.push(res.status)
      expect(res.headers.get('ratelimit')).toMatch(new RegExp(`^"default";r=${2 - i};t=\\d+;pk=:`))
      // Keyed on the loopback socket address (whatever the header said) and the route template.
      expect((await res.json()).key).toBe('127.0.0.1 /limited')
    }
    const refused = await fetch(`${base}/limited`, { headers: { 'x-forwarded-for': '203.0.113.99' } })
    expect([...statuses, refused.status]).toEqual([200, 200, 200, 429])
    expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
  },
)
