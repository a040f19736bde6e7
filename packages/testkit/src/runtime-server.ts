/**
 * One test per runtime (Bun, Deno) against a server module run by that runtime's own binary: the
 * module reads PORT, REDIS_URL, TOLLGATE_PREFIX and RACE_LIMIT (3 here) from its environment and
 * prints `listening` once ready. A runtime that is not installed is skipped outside CI (see
 * runtimes.ts); the server is killed after its test.
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import path from 'node:path'
import { redisUrl } from './env'
import { freePort } from './redis-server'
import { runtimeForTests } from './runtimes'

/** The repository root (this file is packages/testkit/src/runtime-server.ts). */
const ROOT = path.resolve(__dirname, '../../..')

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

/** Starts the module under `bin` and resolves once it printed `listening`. */
function startServer(bin: string, args: string[], env: Record<string, string>, name: string) {
  const child = spawn(bin, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${output}`)), 30_000)
    const onData = (d: Buffer) => {
      output += d.toString()
      if (output.includes('listening')) {
        clearTimeout(timer)
        resolve()
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}):\n${output}`)))
  })
  return { child, ready }
}

/**
 * `describe.each` over Bun and Deno (`title` may use `$name`): starts `serverModule` on the runtime
 * and runs `check` with its base URL, after checking `/runtime` names the runtime.
 */
export function describeOnRuntimes(
  title: string,
  /** Names the test's key prefix. */
  label: string,
  serverModule: string,
  testTitle: (name: string) => string,
  check: (base: string, name: string) => Promise<void>,
): void {
  describe.each(RUNTIMES)(title, ({ name, args }) => {
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

    test(testTitle(name), async () => {
      const port = await freePort()
      const started = startServer(
        bin!,
        args(serverModule),
        {
          PORT: String(port),
          REDIS_URL: redisUrl(),
          TOLLGATE_PREFIX: `${label}-${name}-${process.pid}-${Date.now().toString(36)}`,
          RACE_LIMIT: '3',
        },
        name,
      )
      child = started.child
      await started.ready
      const base = `http://127.0.0.1:${port}`
      expect(await (await fetch(`${base}/runtime`)).text()).toBe(name)
      await check(base, name)
    })
  })
}
