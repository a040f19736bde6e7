/**
 * A local npm registry (Verdaccio) for tests that publish the packages and install them the way users
 * do. Its storage and config live in a temporary folder; npm is pointed at it for `@tollgate/*` only,
 * and gets every other package from its configured registry.
 * @module
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import net from 'node:net'
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
  /** Environment for npm: the registries and the token (and, where needed, a cache of the run's own). */
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
 * A loopback address of this run's own (any of 127/8 on Linux), so the registry's URL is new each run:
 * npm caches package documents by URL, and one cached from an earlier run would name a tarball of another
 * build. Undefined where only 127.0.0.1 exists (macOS): then npm gets a cache of the run's own.
 */
async function runHost(): Promise<string | undefined> {
  const host = `127.${1 + Math.floor(Math.random() * 254)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 253)}`
  return new Promise((resolve) => {
    const probe = net.createServer()
    probe.once('error', () => resolve(undefined))
    probe.listen(0, host, () => probe.close(() => resolve(host)))
  })
}

/**
 * Starts Verdaccio on a free port. npm asks it for `@tollgate/*` only, which it serves from what the test
 * publishes (never from upstream); every other package comes from npm's configured registry through
 * npm's own cache, as a user's install gets it.
 */
export async function startRegistry(options: { startTimeoutMs?: number } = {}): Promise<RegistryHandle> {
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-registry-'))
  trackDir(dir)
  const own = await runHost()
  const host = own ?? REDIS_HOST
  const url = `http://${host}:${port}/`
  const upstream = upstreamRegistry()
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
    url: ${JSON.stringify(upstream)}
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
    [bin, '--config', config, '--listen', `${host}:${port}`],
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
  fs.writeFileSync(
    npmrc,
    `registry=${upstream}\n@tollgate:registry=${url}\n//${host}:${port}/:_authToken=${token}\n`,
  )
  const env: Record<string, string> = {
    // Lower case, as pnpm passes npm_config_* to the scripts it runs: these replace those.
    npm_config_userconfig: npmrc,
    npm_config_registry: upstream,
    npm_config_update_notifier: 'false',
  }
  if (own === undefined) env.npm_config_cache = path.join(dir, 'npm-cache')
  return { url, npmrc, env, output: () => output, stop }
}
