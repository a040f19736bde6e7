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

/**
 * Redis' main-thread CPU (user + sys) so far, in µs, from `INFO cpu`: what its commands and their I/O
 * cost, without its background threads. `send` is the client's raw command call.
 */
export async function redisCpuUs(send: (args: string[]) => Promise<unknown>): Promise<number> {
  const info = String(await send(['INFO', 'cpu']))
  const user = Number(/used_cpu_user_main_thread:([\d.]+)/.exec(info)?.[1] ?? 0)
  const sys = Number(/used_cpu_sys_main_thread:([\d.]+)/.exec(info)?.[1] ?? 0)
  return (user + sys) * 1e6
}
