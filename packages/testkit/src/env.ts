/**
 * Where the suites find their Redis.
 * @module
 */

/**
 * The URL of the Redis that jest's global setup started (or `REDIS_URL` from the environment, when set).
 * Throws instead of defaulting to `redis://127.0.0.1:6379`: that one is shared, and tests must not
 * flush, pause or kill it.
 */
export function redisUrl(): string {
  const url = process.env.REDIS_URL
  if (!url) {
    throw new Error(
      'REDIS_URL is not set: run the tests through jest (its globalSetup, packages/testkit/src/global-setup.ts, ' +
        'starts a redis-server and sets it) or export REDIS_URL=redis://host:port yourself',
    )
  }
  return url
}
