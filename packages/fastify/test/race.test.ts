/** 4 Fastify processes on one Redis, 200 simultaneous requests from one client, limit 5: exactly 5 pass. */
import { join } from 'node:path'
import { raceHttpServers } from '@tollgate/testkit/http-race'

it('4 server processes x 200 simultaneous requests, limit 5: exactly 5 admitted', async () => {
  const result = await raceHttpServers({
    serverModule: join(__dirname, 'fixtures/server.ts'),
    processes: 4,
    requests: 200,
  })
  expect(result).toMatchObject({ ok: 5, limited: 195, other: 0 })
})
