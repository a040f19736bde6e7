/**
 * Race module (see race.ts) for the naive limiter: `startRace({ module: NAIVE_RACE_MODULE,
 * setupArgs: { url, limit } })`, then `round({ key }, perWorker)`. A process entry, not re-exported.
 * @module
 */
import { createNaiveLimiter, type NaiveLimiter, type NaiveLimiterOptions } from './naive-limiter'

let limiter: NaiveLimiter | undefined
let key = ''

/** Opens and warms this child's connection. */
export async function setup(args: NaiveLimiterOptions): Promise<void> {
  limiter = await createNaiveLimiter(args)
}

/** Chooses the key every attempt of the coming round hits. */
export function prepare(args: { key: string }): void {
  key = args.key
}

/** One hit on the round's key. */
export function attempt(): Promise<boolean> {
  if (!limiter) throw new Error('setup() has not run')
  return limiter.hit(key)
}

/** Closes the connection. */
export async function teardown(): Promise<void> {
  await limiter?.close()
}
