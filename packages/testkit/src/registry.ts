/**
 * A local npm registry (Verdaccio) for tests that publish the packages and install them the way users
 * do. Its storage and config live in a temporary folder; packages it does not hold come from the
 * upstream registry (npm's configured one), which it caches for the run.
 * @module
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { trackChild, trackDir, untrackDir } from './cleanup'
import { freePort, REDIS_HOST } from './redis-server'

const requireHere = createRequire(__filename)

/** A running registry. */
export interface RegistryHandle {
  /** `http://127.0.0.1:<port>/` */
  readonly url: string
  /** A user config (`npm_config_userconfig`) with this registry as default and a token allowed to publish. */
  readonly npmrc: string
  /** Environment for npm: the registry, its token, and a cache of this run only (see below). */
  readonly env: Record<string, string>
  /** What Verdaccio printed so far. */
  output(): string
  stop(): Promise<void>
}

/** The registry npm is configured with here (`npm config get registry`), the uplink for third-party packages. */
function upstreamRegistry(): string {
  try {
    const url = execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' }).trim()
    if (/^https?:\/\//.test(url)) return url.endsWith('/') ? url : `${url}/`
  } catch {
    // npm's default below
  }
  return 'https://registry.npmjs.org/'
}

/**
 * Starts Verdaccio on a free port. `@tollgate/*` is served only from what the test publishes (never from
 * upstream); everything else is proxied. npm gets a cache of its own for the run: a package document
 * npm cached from an earlier run's registry on the same port would name a tarball of another build.
 */
export async function startRegistry(options: { startTimeoutMs?: number } = {}): Promise<RegistryHandle> {
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-registry-'))
  trackDir(dir)
  const url = `http://${REDIS_HOST}:${port}/`
  const config = path.join(dir, 'config.yaml')
  fs.writeFileSync(
    config,
    `storage: ${JSON.stringify(path.join(dir, 'storage'))}
auth:
  htpasswd:
    file: ${JSON.stringify(path.join(dir, 'htpasswd'))}
    max_users: 10
uplinks:
  upstream:
    url: ${JSON.stringify(upstreamRegistry())}
    timeout: 60s
    max_fails: 10
    fail_timeout: 1s
    # Fetched once per run: the apps install the same packages.
    maxage: 60m
    agent_options:
      keepAlive: true
      maxSockets: 40
packages:
  '@tollgate/*':
    access: $all
    publish: $authenticated
  '**':
    access: $all
    publish: $authenticated
    proxy: upstream
web:
  enable: false
log: { type: stdout, format: pretty, level: warn }
`,
  )
  const bin = path.join(path.dirname(requireHere.resolve('verdaccio/package.json')), 'bin/verdaccio')
  const child: ChildProcess = spawn(
    process.execPath,
    [bin, '--config', config, '--listen', `${REDIS_HOST}:${port}`],
    {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  trackChild(child)
  let output = ''
  child.stdout?.on('data', (d: Buffer) => (output += d))
  child.stderr?.on('data', (d: Buffer) => (output += d))
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    fs.rmSync(dir, { recursive: true, force: true })
    untrackDir(dir)
  }
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000)
  for (;;) {
    if (child.exitCode !== null) {
      await stop()
      throw new Error(`verdaccio exited (${child.exitCode}):\n${output}`)
    }
    try {
      const res = await fetch(`${url}-/ping`, { signal: AbortSignal.timeout(1000) })
      if (res.ok) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`verdaccio did not answer within the start timeout:\n${output}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  // A throwaway user; its token lets npm publish.
  const res = await fetch(`${url}-/user/org.couchdb.user:tollgate-test`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'tollgate-test', password: `pw-${process.pid}-${Date.now()}` }),
  })
  const { token } = (await res.json()) as { token?: string }
  if (!res.ok || !token) {
    await stop()
    throw new Error(`verdaccio created no user (HTTP ${res.status}):\n${output}`)
  }
  const npmrc = path.join(dir, 'npmrc')
  fs.writeFileSync(npmrc, `registry=${url}\n//${REDIS_HOST}:${port}/:_authToken=${token}\n`)
  const env = {
    // Lower case, as pnpm passes npm_config_* to the scripts it runs: these replace those.
    npm_config_userconfig: npmrc,
    npm_config_registry: url,
    npm_config_cache: path.join(dir, 'npm-cache'),
    npm_config_update_notifier: 'false',
  }
  return { url, npmrc, env, output: () => output, stop }
}
