/**
 * The benchmarks' redis-server: the testkit's spawner (free port, readiness check, retry on a port
 * race, cleanup on exit), under the names the benchmark scripts use.
 * @module
 */
import { freePort, type RedisServerHandle, startRedisServer } from '../../packages/testkit/src/redis-server'

export { freePort }

export type BenchRedis = RedisServerHandle

/** Starts `redis-server` (must be on PATH) with extra arguments and waits until it answers PING. */
export function startBenchRedis(extraArgs: string[] = []): Promise<BenchRedis> {
  return startRedisServer({ args: extraArgs })
}
