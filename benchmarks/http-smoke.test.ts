/**
 * Smoke test of the HTTP benchmark: every framework × variant server process (`lib/http-server.mts`, the
 * one `benchmarks/http.mts` measures) runs under autocannon for ~300 ms and must serve requests with the
 * variant's status only (200, or 429 for the refused client after its first request), no connection
 * errors, the variant's headers, and, for the limited variants, state in Redis. No timing assertions: the
 * machine is shared, and `pnpm bench:http` is where numbers come from.
 *
 * (The servers are separate processes started with tsx, as in the benchmark; jest's transform does not
 * handle the `.mts` helpers, so the few lines of spawning and load are repeated here.)
 */
import { type ChildProcess, spawn } from 'node:child_process'
import path from 'node:path'
// @ts-expect-error autocannon ships no type declarations
import autocannon from 'autocannon'
import { createClient } from 'redis'

const url = process.env.REDIS_URL
if (!url) {
  console.warn(
    'benchmarks/http-smoke.test.ts skipped: REDIS_URL is not set (jest globalSetup from @tollgate/testkit sets it)',
  )
}
const suite = url ? describe : describe.skip

type Framework = 'express' | 'fastify' | 'hono'
type Variant = 'bare' | 'tollgate' | 'peer' | 'refused' | 'tollgate-10k' | 'peer-10k'
const FRAMEWORKS: Framework[] = ['express', 'fastify', 'hono']
const VARIANTS: Variant[] = ['bare', 'tollgate', 'peer', 'refused', 'tollgate-10k', 'peer-10k']
/** The identity header the `-10k` variants key on (one value here: one key in Redis). */
const IDENTITY = { 'x-identity': 'user:smoke' }
const ENTRY = path.join(__dirname, 'lib', 'http-server.mts')
const ROOT = path.resolve(__dirname, '..')
const run = `smoke-${Date.now().toString(36)}`

interface Server {
  child: ChildProcess
  url: string
  prefix: string
}

function start(framework: Framework, variant: Variant): Promise<Server> {
  const prefix = `${run}-${framework}-${variant}`
  const child = spawn(process.execPath, ['--import', 'tsx', ENTRY], {
    cwd: ROOT,
    env: {
      ...process.env,
      HTTP_FRAMEWORK: framework,
      HTTP_VARIANT: variant,
      REDIS_URL: url,
      HTTP_PREFIX: prefix,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${framework}/${variant} server exited with ${code}`)))
    child.once('message', (msg: { type: string; port: number }) => {
      if (msg.type === 'ready') resolve({ child, url: `http://127.0.0.1:${msg.port}`, prefix })
      else reject(new Error(`unexpected message ${JSON.stringify(msg)}`))
    })
  })
}

suite('HTTP benchmark smoke (~300 ms per server)', () => {
  const servers = new Map<string, Server>()
  let redis: ReturnType<typeof createClient>

  beforeAll(async () => {
    redis = createClient({ url })
    redis.on('error', () => {})
    await redis.connect()
    // Started together: each is a tsx process that takes a second or two to compile and listen.
    await Promise.all(
      FRAMEWORKS.flatMap((f) =>
        VARIANTS.map(async (v) => {
          servers.set(`${f}/${v}`, await start(f, v))
        }),
      ),
    )
  }, 120_000)

  afterAll(async () => {
    await Promise.all(
      [...servers.values()].map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.child.exitCode !== null) return resolve()
            s.child.once('exit', () => resolve())
            s.child.kill('SIGTERM')
          }),
      ),
    )
    await redis?.quit()
  })

  const cases = FRAMEWORKS.flatMap((f) => VARIANTS.map((v) => [f, v] as const))
  test.each(cases)('%s / %s', async (framework, variant) => {
    const server = servers.get(`${framework}/${variant}`)!
    // One request first: its headers say which limiter answered.
    const first = await fetch(`${server.url}/hello`, { headers: IDENTITY })
    expect(first.status).toBe(200)
    expect(await first.json()).toEqual({ hello: 'world' })
    const names = [...first.headers.keys()].filter((n) => /ratelimit|retry-after/i.test(n))
    if (variant === 'bare') expect(names).toEqual([])
    else if (variant === 'peer' || variant === 'peer-10k') expect(names.length).toBeGreaterThan(0)
    else expect(names).toEqual(expect.arrayContaining(['ratelimit', 'ratelimit-policy']))

    const result = await autocannon({
      url: `${server.url}/hello`,
      connections: 10,
      duration: 0.3,
      headers: IDENTITY,
    })
    const statuses = Object.fromEntries(
      Object.entries(result.statusCodeStats as Record<string, { count: number }>).map(([c, s]) => [
        c,
        s.count,
      ]),
    )
    const expected = variant === 'refused' ? '429' : '200'
    expect(Object.keys(statuses)).toEqual([expected])
    expect(statuses[expected]).toBeGreaterThan(0)
    expect(result.errors).toBe(0)
    expect(result.timeouts).toBe(0)

    // The limited variants keep their state in Redis, under their prefix.
    // (the refused variant's top set of refused identities aside: `{~h:t}`, RateLimiter.top)
    const keys = (await redis.keys(`${server.prefix}*`)).filter((k) => !k.includes('{~h:t}'))
    expect(keys.length).toBe(variant === 'bare' ? 0 : 1)
  })
})
