/**
 * Where a decision's Node CPU goes: one side of the core benchmark's like-for-like comparison (node-redis
 * without per-command timeout, 256 in flight, sliding-window or the peer's fixed window), run alone for a
 * few seconds under a V8 CPU profile, then the profile's busy time split by where the code comes from
 * (GC, Tollgate, the peer, the Redis client, Node's JS, native calls such as the socket writes).
 *
 * `pnpm build`, then `pnpm bench:run --cpu-prof --cpu-prof-dir=<dir> benchmarks/core-profile.mts tollgate|compact|peer [hot|10k]`
 * (`compact`: Tollgate with `storage: 'compact'`; `reserve`: Tollgate with `reserve: 1000`)
 * (the built packages, as users run them: lib/build.ts), then
 * `pnpm bench:run benchmarks/core-profile.mts summary <dir>/<file>.cpuprofile`.
 * Used for "What bounds it" in docs/benchmarks.md.
 * @module
 */
import fs from 'node:fs'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createClient } from 'redis'
import { TOLLGATE_BUILD } from './lib/build'
import { measure, type Op, outcomeOf } from './lib/measure'
import { redisCpuUs, startBenchRedis } from './lib/redis-server'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string }
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** The part of the process a profile node belongs to. */
function partOf({ functionName, url }: ProfileNode['callFrame']): string {
  if (functionName === '(idle)') return 'idle'
  if (functionName === '(garbage collector)') return 'GC'
  if (functionName === '(program)') return 'V8 (program)'
  if (/\/packages\/core\/(src|dist)\//.test(url)) return 'Tollgate'
  if (/@redis|ioredis|denque|cluster-key-slot/.test(url)) return 'Redis client'
  if (url.includes('rate-limiter-flexible')) return 'peer library'
  if (url.includes('/benchmarks/')) return 'benchmark loop'
  if (/esm\/|cjs\/|loader|source_map|tsx|esbuild|bootstrap/.test(url)) return 'startup'
  if (url === '') return 'native (syscalls: socket writes and reads)'
  if (url.startsWith('node:')) return "Node's JS (net, streams, timers)"
  return 'other'
}

function summary(file: string): void {
  const p = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile
  const self = new Map<number, number>()
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i]!
    self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0))
  }
  const parts = new Map<string, number>()
  for (const n of p.nodes) {
    const t = self.get(n.id) ?? 0
    if (t > 0) parts.set(partOf(n.callFrame), (parts.get(partOf(n.callFrame)) ?? 0) + t)
  }
  parts.delete('idle')
  parts.delete('startup')
  const busy = [...parts.values()].reduce((a, b) => a + b, 0)
  process.stdout.write(`${file}: ${(busy / 1e6).toFixed(1)} s busy (idle and module loading left out)\n`)
  for (const [part, t] of [...parts].sort((a, b) => b[1] - a[1]))
    process.stdout.write(`${((t / busy) * 100).toFixed(1).padStart(5)} %  ${part}\n`)
}

/** Out of reach within a run, on one hot key too: a limit reached mid-run would measure refusals. */
const LIMIT = 60_000_000

async function run(side: 'tollgate' | 'compact' | 'reserve' | 'peer', keys: 'hot' | '10k'): Promise<void> {
  const redis = await startBenchRedis()
  const client = await createClient({ url: redis.url, commandOptions: { timeout: 0 } }).connect()
  const key = keys === '10k' ? (i: number) => `k${i % 10_000}` : () => 'hot'
  let op: Op
  if (side !== 'peer') {
    const store =
      side === 'compact'
        ? new RedisStore(client, { storage: 'compact', secret: 'benchmark-secret-0123' })
        : new RedisStore(client)
    const limiter = new RateLimiter({
      store,
      prefix: 'p',
      limit: LIMIT,
      window: 60_000,
      timeoutMs: 5000,
      ...(side === 'reserve' ? { reserve: 1000 } : {}),
    })
    op = (i) => limiter.consume(key(i)).then(outcomeOf)
  } else {
    const rlf = new RateLimiterRedis({
      storeClient: client,
      useRedisPackage: true,
      points: LIMIT,
      duration: 60,
      keyPrefix: 'r',
    })
    op = (i) => rlf.consume(key(i)).then(() => 'admitted' as const)
  }
  await measure(op, { durationMs: 1000 })
  const send = (args: string[]) => client.sendCommand(args)
  const redis0 = await redisCpuUs(send)
  const node0 = process.cpuUsage()
  const m = await measure(op, { durationMs: 4000 })
  const node = process.cpuUsage(node0)
  const redisUs = (await redisCpuUs(send)) - redis0
  // CPU per decision, Node's process (all its threads) and Redis' main thread: steadier than the rate
  // on a shared machine
  const per = (us: number) => (us / m.decisions).toFixed(2)
  process.stdout.write(
    `${side} ${keys}: ${Math.round(m.perSecond)} decisions/s, CPU µs per decision: Node ${per(node.user + node.system)}, ` +
      `Redis ${per(redisUs)} (${TOLLGATE_BUILD})\n`,
  )
  await client.quit()
  await redis.stop()
}

const [what, arg] = process.argv.slice(2)
if (what === 'summary' && arg) summary(arg)
else if (what === 'tollgate' || what === 'compact' || what === 'reserve' || what === 'peer')
  await run(what, arg === 'hot' ? 'hot' : '10k')
else
  throw new Error(
    'usage: core-profile.mts tollgate|compact|reserve|peer [hot|10k] | summary <file.cpuprofile>',
  )
