/**
 * Exactness over HTTP across OS processes: several server processes of one adapter share one Redis and
 * one key prefix; one client fires many requests at them at once, spread round-robin over warmed
 * keep-alive connections; the caller asserts that exactly `limit` were admitted.
 *
 * ## The server module contract (each adapter ships `test/fixtures/server.ts`, built on race-server.ts)
 *
 * Run as `node --import tsx <serverModule>` with the repo root as cwd, it reads from its environment:
 * - `PORT`: listen on `127.0.0.1:PORT`;
 * - `REDIS_URL`: the Redis to use (one node-redis client, `RedisStore`);
 * - `TOLLGATE_PREFIX`: the limiter prefix (every process gets the same one);
 * - `RACE_LIMIT`: the quota (default 5), per client IP, over a window of one minute;
 *
 * and serves `GET /health` → 200, never limited (readiness and warm-up), and `GET /race` → 200 behind
 * the adapter's rate limiter with its default key (the client IP). It exits on SIGTERM.
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import http from 'node:http'
import path from 'node:path'
import { trackChild } from './cleanup'
import { findRepoRoot } from './race'
import { freePort } from './redis-server'

/** Options of {@link raceHttpServers}. */
export interface HttpRaceOptions {
  /** Absolute path of the server module (see the module docs). */
  serverModule: string
  /** Server processes to start. @default 4 */
  processes?: number
  /** Requests fired at once, round-robin over the servers. @default 200 */
  requests?: number
  /** Extra environment for the servers (`REDIS_URL`, `TOLLGATE_PREFIX` and `RACE_LIMIT` may be set here). */
  env?: Record<string, string>
  /** Path the burst goes to. @default '/race' */
  path?: string
  /** Budget for start-up and for the burst, each. @default 30000 */
  timeoutMs?: number
}

/** What the burst got back. */
export interface HttpRaceResult {
  /** Responses with status 200. */
  ok: number
  /** Responses with status 429. */
  limited: number
  /** Any other status, or a failed request (status 0). */
  other: number
  /** Count per status. */
  statuses: Record<number, number>
  /** 200s per server, by process index. */
  okPerServer: number[]
}

function get(port: number, urlPath: string, agent: http.Agent | false): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, agent }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
      res.on('error', () => resolve(0))
    })
    req.on('error', () => resolve(0))
  })
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Server {
  child: ChildProcess
  port: number
  output: string[]
  exited: Promise<void>
}

async function stop(servers: Server[]): Promise<void> {
  await Promise.all(
    servers.map(async (s) => {
      if (s.child.exitCode !== null || s.child.signalCode !== null) return
      s.child.kill('SIGTERM')
      const timer = setTimeout(() => s.child.kill('SIGKILL'), 5000)
      await s.exited
      clearTimeout(timer)
    }),
  )
}

/**
 * Starts `processes` servers, waits until each answers `GET /health`, opens `requests / processes`
 * keep-alive connections to each, then fires all `requests` in one synchronous loop and counts the
 * statuses. The servers are stopped before it resolves (or rejects).
 *
 * @example
 * const r = await raceHttpServers({ serverModule: join(__dirname, 'fixtures/server.ts'), env: { REDIS_URL: redisUrl() } })
 * expect(r.ok).toBe(5)
 */
export async function raceHttpServers(options: HttpRaceOptions): Promise<HttpRaceResult> {
  const { serverModule, processes = 4, requests = 200, path: urlPath = '/race', timeoutMs = 30_000 } = options
  if (!path.isAbsolute(serverModule))
    throw new Error(`serverModule must be an absolute path: ${serverModule}`)
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TOLLGATE_PREFIX: `http-race-${process.pid}-${Date.now().toString(36)}`,
    RACE_LIMIT: '5',
    ...options.env,
  }
  if (!env.REDIS_URL) throw new Error('REDIS_URL is not set (pass it in env, or run under jest)')
  const root = findRepoRoot()
  const servers: Server[] = []
  const agents: http.Agent[] = []
  try {
    for (let i = 0; i < processes; i++) {
      const port = await freePort()
      const child = spawn(process.execPath, ['--import', 'tsx', serverModule], {
        cwd: root,
        env: { ...env, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      trackChild(child)
      const output: string[] = []
      child.stdout?.on('data', (d: Buffer) => output.push(d.toString()))
      child.stderr?.on('data', (d: Buffer) => output.push(d.toString()))
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      servers.push({ child, port, output, exited })
    }

    // Ready: every server answers /health.
    const deadline = Date.now() + timeoutMs
    await Promise.all(
      servers.map(async (s, i) => {
        for (;;) {
          if (s.child.exitCode !== null) {
            throw new Error(`server ${i} exited (code ${s.child.exitCode}):\n${s.output.join('')}`)
          }
          if ((await get(s.port, '/health', false)) === 200) return
          if (Date.now() > deadline)
            throw new Error(`server ${i} not ready in ${timeoutMs} ms:\n${s.output.join('')}`)
          await sleep(50)
        }
      }),
    )

    // Warm: open every connection the burst will use, so no request pays a TCP handshake in the race.
    const perServer = Math.ceil(requests / processes)
    for (let i = 0; i < processes; i++)
      agents.push(new http.Agent({ keepAlive: true, maxSockets: perServer }))
    await Promise.all(
      servers.flatMap((s, i) => Array.from({ length: perServer }, () => get(s.port, '/health', agents[i]!))),
    )

    // The burst: every request leaves in one synchronous loop.
    const pending: Array<Promise<number>> = []
    for (let n = 0; n < requests; n++) {
      const i = n % processes
      pending.push(get(servers[i]!.port, urlPath, agents[i]!))
    }
    let timer: NodeJS.Timeout | undefined
    const codes = await Promise.race([
      Promise.all(pending),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`burst not answered in ${timeoutMs} ms`)), timeoutMs)
      }),
    ])
    clearTimeout(timer)

    const statuses: Record<number, number> = {}
    const okPerServer = servers.map(() => 0)
    codes.forEach((code, n) => {
      statuses[code] = (statuses[code] ?? 0) + 1
      if (code === 200) okPerServer[n % processes]!++
    })
    const ok = statuses[200] ?? 0
    const limited = statuses[429] ?? 0
    return { ok, limited, other: requests - ok - limited, statuses, okPerServer }
  } finally {
    for (const agent of agents) agent.destroy()
    await stop(servers)
  }
}
