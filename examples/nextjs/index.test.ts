/**
 * Builds the app (`next build`), serves it (`next start`) on a free port against the test Redis, then
 * checks the route handler and the proxy: 200s with RateLimit headers, then the 429. The test plays the
 * proxy in front of the app, so it sets `x-real-ip` as Vercel would.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import path from 'node:path'
import { freePort, redisUrl } from '@tollgate/testkit'

const DIR = __dirname
const NEXT = path.join(DIR, 'node_modules/.bin/next')
const ENV = {
  ...process.env,
  NEXT_TELEMETRY_DISABLED: '1',
  REDIS_URL: redisUrl(),
  TOLLGATE_PREFIX: `example-next-${process.pid}-${Date.now().toString(36)}`,
}

let server: ChildProcess | undefined
let base: string

/** Runs a command to the end; rejects with its output when it fails. */
function run(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(NEXT, args, { cwd: DIR, env: ENV, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (d: Buffer) => (output += d))
    child.stderr.on('data', (d: Buffer) => (output += d))
    child.once('error', reject)
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`next ${args[0]} (${code}):\n${output}`)),
    )
  })
}

beforeAll(async () => {
  await run(['build'])
  const port = await freePort()
  server = spawn(NEXT, ['start', '--port', String(port), '--hostname', '127.0.0.1'], {
    cwd: DIR,
    env: ENV,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      output += d
      if (output.includes('Ready')) resolve()
    }
    server!.stdout?.on('data', onData)
    server!.stderr?.on('data', onData)
    server!.once('exit', (code) => reject(new Error(`next start exited (${code}):\n${output}`)))
  })
  base = `http://127.0.0.1:${port}`
  // Next's build on a busy machine is the slow part: generous, and never asserted on.
}, 600_000)

afterAll(async () => {
  if (server && server.exitCode === null && server.signalCode === null) {
    const exited = new Promise((resolve) => server!.once('exit', resolve))
    server.kill('SIGTERM')
    await exited
  }
})

const from = (ip: string) => ({ headers: { 'x-real-ip': ip } })

it('route handler: 3 x 200 with RateLimit headers, then 429 with Retry-After; other clients unaffected', async () => {
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${base}/api/hello`, from('198.51.100.1'))
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ hello: 'world' })
    expect(res.headers.get('ratelimit-policy')).toMatch(/^"default";q=3;w=60;pk=:[A-Za-z0-9+/]+:$/)
    expect(res.headers.get('ratelimit')).toMatch(new RegExp(`^"default";r=${2 - i};t=\\d+;pk=:`))
  }
  const refused = await fetch(`${base}/api/hello`, from('198.51.100.1'))
  expect(refused.status).toBe(429)
  expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
  expect(refused.headers.get('ratelimit')).toMatch(/^"default";r=0;t=\d+;pk=:/)
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
  expect((await fetch(`${base}/api/hello`, from('198.51.100.2'))).status).toBe(200)
})

it('without the address header: 400, never a budget shared by every client', async () => {
  const res = await fetch(`${base}/api/hello`)
  expect(res.status).toBe(400)
  expect(res.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
})

it('proxy: the page gets 5 x 200 with RateLimit headers, then the 429 from the proxy', async () => {
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${base}/`, from('198.51.100.3'))
    expect(res.status).toBe(200)
    expect(await res.text()).toContain('hello')
    expect(res.headers.get('ratelimit')).toMatch(new RegExp(`^"default";r=${4 - i};t=\\d+;pk=:`))
  }
  const refused = await fetch(`${base}/`, from('198.51.100.3'))
  expect(refused.status).toBe(429)
  expect(refused.headers.get('ratelimit-policy')).toMatch(/^"default";q=5;w=60;pk=:/)
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
})
