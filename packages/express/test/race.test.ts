/**
 * 4 Express processes on one Redis, 200 simultaneous requests from one client, limit 5: exactly 5 pass.
 * The same harness with a naive GET-then-INCR limiter over-admits: the race is real.
 */
import { join } from 'node:path'
import { raceHttpServers } from '@tollgate/testkit/http-race'

const serverModule = join(__dirname, 'fixtures/server.ts')

it('4 server processes x 200 simultaneous requests, limit 5: exactly 5 admitted', async () => {
  const result = await raceHttpServers({ serverModule, processes: 4, requests: 200 })
  expect(result).toMatchObject({ ok: 5, limited: 195, other: 0 })
})

it('the harness catches a naive GET-then-INCR limiter over-admitting', async () => {
  const result = await raceHttpServers({
    serverModule,
    processes: 4,
    requests: 200,
    env: { RACE_NAIVE: '1' },
  })
  expect(result.other).toBe(0)
  expect(result.ok).toBeGreaterThan(5)
})
