/**
 * Runs an example app as its own process (`node --import tsx <entry>`) on a free port against the test
 * Redis, the way a user starts it, and waits until it prints `listening on`.
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { dirname } from 'node:path'
import { freePort } from './redis-server'
import { sleepAtLeast } from './time'

/** A running example. */
export interface ExampleProcess {
  /** `http://127.0.0.1:<port>` */
  readonly base: string
  readonly child: ChildProcess
  /** SIGTERM, then wait for the exit. */
  stop(): Promise<void>
}

/**
 * Starts `entry` with `PORT`, `REDIS_URL` and a fresh `TOLLGATE_PREFIX`, plus `env`. `loader` is what
 * `node --import` loads: `'tsx/esm'` leaves `require()` to Node, so a CommonJS package requiring an
 * ES-module-only one (Nest 12) gets the instance the app imported rather than a second copy.
 */
export async function startExample(
  entry: string,
  env: Record<string, string> = {},
  { loader = 'tsx' }: { loader?: 'tsx' | 'tsx/esm' } = {},
): Promise<ExampleProcess> {
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', loader, entry], {
    cwd: dirname(entry),
    env: {
      ...process.env,
      PORT: String(port),
      REDIS_URL: process.env.REDIS_URL,
      TOLLGATE_PREFIX: `example-test-${process.pid}-${Date.now()}`,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`example did not start:\n${output}`)), 30_000)
    const onData = (d: Buffer) => {
      output += d.toString()
      if (output.includes('listening on')) {
        clearTimeout(timer)
        resolve()
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`example exited (${code}):\n${output}`))
    })
  })
  return {
    base: `http://127.0.0.1:${port}`,
    child,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    },
  }
}

/**
 * `tollgate_decisions_total` from a Prometheus text exposition, summed over `source` (store or deny
 * cache), per outcome: what the examples' `/metrics` tests compare against a scripted burst.
 */
export function decisionsByOutcome(metrics: string, limiter: string, policy: string): Record<string, number> {
  const counts: Record<string, number> = { allowed: 0, refused: 0, shadow_refused: 0 }
  const re = new RegExp(
    `^tollgate_decisions_total\\{limiter="${limiter}",policy="${policy}",outcome="(\\w+)",source="\\w+"\\} (\\d+)$`,
    'gm',
  )
  for (const m of metrics.matchAll(re)) counts[m[1]!] = (counts[m[1]!] ?? 0) + Number(m[2])
  return counts
}

/**
 * Requests `url` until a response carries a `RateLimit` header, the sign that the example's store
 * answered: an example listens before its Redis client has connected, and until then its failure policy
 * answers, without one. Use a route and an identity the test does not count on.
 */
export async function untilStoreAnswers(
  url: string,
  init: RequestInit = {},
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const res = await fetch(url, init)
    await res.arrayBuffer()
    if (res.headers.get('ratelimit') !== null) return
    if (Date.now() > deadline) throw new Error(`${url}: no RateLimit header within ${timeoutMs} ms`)
    await sleepAtLeast(50)
  }
}

/**
 * {@link untilStoreAnswers} on an example's `POST /login`, whose limiter the burst tests do not count: a
 * failed login of an address and an account no test uses.
 */
export function untilLoginAnswers(base: string): Promise<void> {
  return untilStoreAnswers(`${base}/login`, {
    method: 'POST',
    headers: { 'x-forwarded-for': '203.0.113.250', 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'warm-up@example.com', password: 'warm-up' }),
  })
}
