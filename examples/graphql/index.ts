/**
 * The catalogue on node's http server. `REDIS_URL` (default redis://127.0.0.1:6379) holds the budgets,
 * `PORT` (default 4000) is where it listens: POST queries to /graphql.
 */
import { createServer } from 'node:http'
import { RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { catalogue, points } from './server'

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }).on('error', (err) =>
  console.error('redis:', err.message),
)
redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
const yoga = catalogue(points(new RedisStore(redis), process.env.TOLLGATE_PREFIX))
const port = Number(process.env.PORT ?? 4000)
createServer(yoga).listen(port, () => console.log(`catalogue on http://127.0.0.1:${port}/graphql`))
