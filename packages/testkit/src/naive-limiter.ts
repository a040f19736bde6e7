/**
 * The fixed-window limiter everybody writes first: GET the counter, compare, then INCR and PEXPIRE.
 * It is wrong (the check and the increment are separate round trips, so concurrent callers all pass the
 * check), and that is its purpose here: the race harness must catch it, or the harness proves nothing.
 * Never use it outside tests.
 * @module
 */
import path from 'node:path'
import { createClient } from 'redis'

/** Absolute path of the race module built on this limiter, for `startRace({ module })`. */
export const NAIVE_RACE_MODULE = path.join(__dirname, 'naive-race-module.ts')

/** Options for {@link createNaiveLimiter}. */
export interface NaiveLimiterOptions {
  url: string
  /** Hits admitted per window. */
  limit: number
  /** @default 60000 */
  windowMs?: number
}

/** A connected naive limiter. */
export interface NaiveLimiter {
  /** Counts one hit on `key`; `true` if admitted. Racy by design. */
  hit(key: string): Promise<boolean>
  close(): Promise<void>
}

/** Connects with node-redis (and warms the connection with a PING) and returns the racy limiter. */
export async function createNaiveLimiter(opts: NaiveLimiterOptions): Promise<NaiveLimiter> {
  const windowMs = opts.windowMs ?? 60_000
  const client = createClient({ url: opts.url })
  // node-redis emits 'error' on connection trouble and would crash the process without a listener; the
  // failed commands reject on their own, which is what the harness counts.
  client.on('error', () => {})
  await client.connect()
  await client.ping()
  return {
    async hit(key) {
      const current = Number((await client.get(key)) ?? 0)
      if (current >= opts.limit) return false
      await client.incr(key)
      await client.pExpire(key, windowMs)
      return true
    },
    async close() {
      await client.close()
    },
  }
}
