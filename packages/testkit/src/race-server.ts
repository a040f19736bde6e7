/**
 * What every adapter's race server (`test/fixtures/server.ts`, run as a child process by
 * {@link raceHttpServers}) shares: the environment read, one node-redis client, the limiter, SIGTERM
 * and start-up failures. The adapter supplies only how its framework serves `/health` and `/race`.
 * @module
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { createClient } from 'redis'

/** The parts a race server is built from. */
export interface RaceServerParts {
  /** Listen on 127.0.0.1 at this port. */
  port: number
  /** The quota per client IP per minute (`RACE_LIMIT`, default 5). */
  limit: number
  /** The prefix every process of the race shares (`TOLLGATE_PREFIX`). */
  prefix: string
  /** The limiter `/race` must sit behind, on the race's Redis with its default key. */
  limiter: RateLimiter
  /** The process's Redis client (for a deliberately naive limiter). */
  redis: RaceRedis
}

const redisClient = () => createClient({ url: process.env.REDIS_URL })
type RaceRedis = ReturnType<typeof redisClient>

/** Stops the server; the helper then closes Redis and exits. */
export type StopServer = () => unknown

/**
 * Starts a race server from its entry file: `listen` serves `GET /health` (never limited) and
 * `GET /race` (behind `parts.limiter`) on `parts.port`, and returns how to stop.
 */
export function serveRace(listen: (parts: RaceServerParts) => Promise<StopServer>): void {
  start(listen).catch((error) => {
    console.error(error)
    process.exit(1)
  })
}

async function start(listen: (parts: RaceServerParts) => Promise<StopServer>): Promise<void> {
  const redis = redisClient()
  redis.on('error', (error) => console.error('redis:', error.message))
  await redis.connect()
  const prefix = process.env.TOLLGATE_PREFIX ?? 'race'
  const limit = Number(process.env.RACE_LIMIT ?? 5)
  const limiter = new RateLimiter({
    store: new RedisStore(redis),
    prefix,
    limit,
    window: '1m',
    // A store call past its deadline would otherwise be admitted ('allow', the default) and read as an
    // over-admission: on a loaded machine, give calls time, and make any fallback show as a 503.
    timeoutMs: 5000,
    onStoreError: 'deny',
  })
  const stop = await listen({ port: Number(process.env.PORT), limit, prefix, limiter, redis })
  process.once('SIGTERM', () => {
    Promise.resolve()
      .then(stop)
      .finally(() => redis.quit().finally(() => process.exit(0)))
  })
}
