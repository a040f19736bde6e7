/**
 * Jest `globalTeardown`: stops the redis-server that globalSetup started (never one given via `REDIS_URL`).
 * (`globalThis.__TOLLGATE_REDIS__` is declared in global-setup.ts.)
 * @module
 */
import { removeRunPacks } from './packages'

/**
 * Removes this run's packed tarballs, stops the server and unsets the `REDIS_URL` that globalSetup published, so a following run (jest
 * `--watch`) starts a new server instead of pointing at a dead one.
 */
export default async function globalTeardown(): Promise<void> {
  removeRunPacks()
  const server = globalThis.__TOLLGATE_REDIS__
  if (!server) return
  globalThis.__TOLLGATE_REDIS__ = undefined
  if (process.env.REDIS_URL === server.url) delete process.env.REDIS_URL
  await server.stop()
}
