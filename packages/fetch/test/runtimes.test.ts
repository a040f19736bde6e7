/**
 * The package on Bun and Deno, each with its own server (`Bun.serve`, `Deno.serve`) and its own client
 * address (`server.requestIP(req)`, `info.remoteAddr`), against the suite's Redis. Both runtimes come from
 * `pnpm install:runtimes`, or `BUN_BIN` / `DENO_BIN`, or `PATH`. Outside CI a runtime that is not
 * installed is skipped, and says so; with `CI=true` it fails.
 */
import path from 'node:path'
import { describeOnRuntimes } from '@tollgate/testkit/runtime-server'

describeOnRuntimes(
  '@tollgate/fetch on $name',
  'fetch-runtime',
  path.join(__dirname, 'fixtures/runtime-server.ts'),
  (name) =>
    `withRateLimit and checkRateLimit on ${name}'s own client address: 3 x 200, then 429 with headers`,
  async (base) => {
    for (const route of ['/limited', '/checked']) {
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) {
        // A forwarded header from the client changes nothing: the socket address decides.
        const res = await fetch(`${base}${route}`, { headers: { 'x-forwarded-for': `203.0.113.${i}` } })
        statuses.push(res.status)
        expect([route, res.headers.get('ratelimit')]).toEqual([
          route,
          expect.stringMatching(new RegExp(`^"default";r=${2 - i};t=\\d+;pk=:`)),
        ])
        expect(res.headers.get('ratelimit-policy')).toMatch(/^"default";q=3;w=86400;pk=:/)
        const body = await res.json()
        if (route === '/checked') expect(body.key).toBe('127.0.0.1')
      }
      const refused = await fetch(`${base}${route}`, { headers: { 'x-forwarded-for': '203.0.113.99' } })
      expect([route, ...statuses, refused.status]).toEqual([route, 200, 200, 200, 429])
      expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
    }
  },
)
