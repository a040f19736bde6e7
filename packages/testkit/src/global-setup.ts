/**
 * Jest `globalSetup`: one redis-server for the whole run, started before any test worker, so every worker
 * inherits its URL through `process.env.REDIS_URL` and no suite pays the start-up cost again.
 * @module
 */
import { type RedisServerHandle, startRedisServer } from './redis-server'

declare global {
  /** The server {@link globalSetup} started (shared with globalTeardown, which runs in the same process). */
  var __TOLLGATE_REDIS__: RedisServerHandle | undefined
}

/**
 * Uses `REDIS_URL` when the environment sets it (point the suite at any Redis); otherwise starts a
 * redis-server on a free port and publishes its URL as `REDIS_URL` for the workers.
 */
export default async function globalSetup(): Promise<void> {
  // Names this run for the workers, so the suites that pack the packages pack them once per run.
  process.env.TOLLGATE_RUN_ID ??= `${process.pid}-${Date.now().toString(36)}`
  if (process.env.REDIS_URL) return
  const server = await startRedisServer()
  process.env.REDIS_URL = server.url
  globalThis.__TOLLGATE_REDIS__ = server
}
