/**
 * The package on Bun and Deno, each with its own server (`Bun.serve`, `Deno.serve`) and its own client
 * address (`server.requestIP(req)`, `info.remoteAddr`), against the suite's Redis. Both runtimes come from
 * `pnpm install:runtimes`, or `BUN_BIN` / `DENO_BIN`, or `PATH`. Outside CI a runtime that is not
 * installed is skipped, and says so; with `CI=true` it fails.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import path from 'node:path'
import { freePort, redisUrl, runtimeForTests } from '@tollgate/testkit'

const ROOT = path.resolve(__dirname, '../../..')
const SERVER = path.join(__dirname, 'fixtures/runtime-server.ts')

const RUNTIMES = [
  { name: 'bun' as const, args: (file: string) => [file] },
  {
    name: 'deno' as const,
    // Core imports are extensionless (bundler resolution), hence sloppy imports.
    args: (file: string) => [
      'run',
      '--allow-net',
      '--allow-env',
      '--allow-read',
      '--allow-sys',
      '--no-lock',
      '--unstable-sloppy-imports',
      file,
    ],
  },
]

describe.each(RUNTIMES)('@tollgate/fetch on $name', ({ name, args }) => {
  const bin = runtimeForTests(name)
  const test = bin ? it : it.skip

  let child: ChildProcess | undefined
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
  })

  test(`withRateLimit and checkRateLimit on ${name}'s own client address: 3 x 200, then 429 with headers`, async () => {
    const port = await freePort()
    child = spawn(bin!, args(SERVER), {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: String(port),
        REDIS_URL: redisUrl(),
        TOLLGATE_PREFIX: `fetch-runtime-${name}-${process.pid}-${Date.now().toString(36)}`,
        RACE_LIMIT: '3',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${output}`)), 30_000)
      const onData = (d: Buffer) => {
        output += d.toString()
        if (output.includes('listening')) {
          clearTimeout(timer)
          resolve()
        }
      }
      child!.stdout?.on('data', onData)
      child!.stderr?.on('data', onData)
      child!.once('exit', (code) => reject(new Error(`${name} exited (${code}):\n${output}`)))
    })
    const base = `http://127.0.0.1:${port}`
    expect(await (await fetch(`${base}/runtime`)).text()).toBe(name)
    for (const route of ['/limited', '/checked']) {
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) {
        // A forwarded header from the client changes nothing: the socket address decides.
        const res = await fetch(`${base}${route}`, { headers: { 'x-forwarded-for': `203.0.113.${i}` } })
        statuses.push(res.status)
        expect([route, res.headers.get('ratelimit')]).toEqual([
          route,
          expect.stringMatching(new RegExp(`^"default";r=${2 - i};t=\\d+;pk=:`)),
        ])
        expect(res.headers.get('ratelimit-policy')).toMatch(/^"default";q=3;w=86400;pk=:/)
        const body = await res.json()
        if (route === '/checked') expect(body.key).toBe('127.0.0.1')
      }
      const refused = await fetch(`${base}${route}`, { headers: { 'x-forwarded-for': '203.0.113.99' } })
      expect([route, ...statuses, refused.status]).toEqual([route, 200, 200, 200, 429])
      expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
    }
  })
})
