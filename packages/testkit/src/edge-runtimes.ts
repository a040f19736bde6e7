/**
 * Edge runtimes from npm, for tests, benchmarks and the Workers example: bundle a worker with esbuild
 * (as a bundler for those platforms would, with no Node built-in allowed), run it in `workerd` (the
 * Cloudflare Workers runtime itself, through its npm binary, installed by `pnpm install:runtimes`:
 * wrangler and miniflare 4 need Node 22) or in `edge-runtime` (Vercel's local Edge runtime).
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { gzipSync } from 'node:zlib'
import { trackChild, trackDir, untrackDir } from './cleanup'
import { freePort, REDIS_HOST } from './redis-server'
import { runtimeBin } from './runtimes'

const requireHere = createRequire(__filename)

/** A bundled worker. */
export interface WorkerBundle {
  /** The JavaScript, one file. */
  readonly code: string
  readonly bytes: number
  /** Bytes after gzip -9 (what Cloudflare's upload limit counts). */
  readonly gzipBytes: number
  /** The files that went into it, relative to the repository (to check what a bundle pulls in). */
  readonly inputs: readonly string[]
}

/** Options for {@link bundleWorker}. */
export interface BundleOptions {
  /** `'esm'` for workerd's module workers, `'iife'` for edge-runtime's service-worker script. @default 'esm' */
  format?: 'esm' | 'iife'
  /** Minified, as wrangler deploys it. @default true */
  minify?: boolean
  /** esbuild `define`: values inlined at build time (`{ 'process.env.X': '"…"' }`). */
  define?: Record<string, string>
}

/**
 * Bundles an entry file for an edge runtime: platform `browser` with the `workerd` / `worker` /
 * `edge-light` conditions, so importing a Node built-in is a build error, not a runtime surprise.
 */
export async function bundleWorker(entry: string, options: BundleOptions = {}): Promise<WorkerBundle> {
  const esbuild: typeof import('esbuild') = requireHere('esbuild')
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: options.format ?? 'esm',
    platform: 'browser',
    conditions: ['workerd', 'worker', 'edge-light', 'browser'],
    target: 'es2022',
    minify: options.minify ?? true,
    metafile: true,
    define: options.define,
    logLevel: 'silent',
  })
  const code = result.outputFiles[0]!.text // write: false gives the one bundle's output
  return {
    code,
    bytes: Buffer.byteLength(code),
    gzipBytes: gzipSync(code, { level: 9 }).length,
    inputs: Object.keys(result.metafile.inputs),
  }
}

/** A running workerd process. */
export interface WorkerdHandle {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly pid: number
  /** What workerd printed so far (uncaught errors, `console.log` of the worker). */
  output(): string
  stop(): Promise<void>
}

/** The workerd executable (from `pnpm install:runtimes`); throws, naming that command, when it is missing. */
export function workerdBin(): string {
  return runtimeBin('workerd')
}

/** Options for {@link startWorkerd}. */
export interface WorkerdOptions {
  /** An ES module worker (`export default { fetch }`), e.g. from {@link bundleWorker}. */
  code: string
  /** Text bindings, read as `env.NAME` in the worker. */
  bindings?: Record<string, string>
  /** @default '2025-09-01' */
  compatibilityDate?: string
  /** @default a free port */
  port?: number
  /** How long to wait for the first answer. @default 30000 */
  startTimeoutMs?: number
  /**
   * `'http'`: ready once `GET /__ready` gets any answer. `'tcp'`: once the port accepts a connection, so
   * the worker has served no request yet (to time a cold first request). @default 'http'
   */
  ready?: 'http' | 'tcp'
  /** Receives what workerd prints (the worker's console output, uncaught errors) as it comes. */
  onOutput?: (text: string) => void
}

function accepts(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: REDIS_HOST, port })
    socket.once('connect', () => {
      socket.destroy()
      resolve()
    })
    socket.once('error', reject)
  })
}

const capnpString = (s: string) => JSON.stringify(s)

/**
 * Starts `workerd serve` on a generated config: one worker on 127.0.0.1, its outbound fetches allowed to
 * loopback (workerd's default network blocks private and local addresses). Resolves once it answers.
 */
export async function startWorkerd(options: WorkerdOptions): Promise<WorkerdHandle> {
  const port = options.port ?? (await freePort())
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-workerd-'))
  trackDir(dir)
  fs.writeFileSync(path.join(dir, 'worker.js'), options.code)
  const bindings = Object.entries(options.bindings ?? {})
    .map(([name, value]) => `(name = ${capnpString(name)}, text = ${capnpString(value)})`)
    .join(', ')
  fs.writeFileSync(
    path.join(dir, 'config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "loopback", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "${REDIS_HOST}:${port}", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = ${capnpString(options.compatibilityDate ?? '2025-09-01')},
  bindings = [${bindings}],
  globalOutbound = "loopback",
);
`,
  )
  const child: ChildProcess = spawn(workerdBin(), ['serve', path.join(dir, 'config.capnp')], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  trackChild(child)
  let output = ''
  const onData = (d: Buffer) => {
    output += d
    options.onOutput?.(d.toString())
  }
  child.stdout?.on('data', onData)
  child.stderr?.on('data', onData)
  const url = `http://${REDIS_HOST}:${port}`
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    fs.rmSync(dir, { recursive: true, force: true })
    untrackDir(dir)
  }
  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000)
  for (;;) {
    if (child.exitCode !== null) {
      await stop()
      throw new Error(`workerd exited (${child.exitCode}):\n${output}`)
    }
    try {
      if (options.ready === 'tcp') await accepts(port)
      else await fetch(`${url}/__ready`, { signal: AbortSignal.timeout(1000) })
      break
    } catch {
      if (Date.now() > deadline) {
        await stop()
        throw new Error(`workerd did not answer within the start timeout:\n${output}`)
      }
      await new Promise((resolve) => setTimeout(resolve, options.ready === 'tcp' ? 2 : 50))
    }
  }
  return { url, pid: child.pid!, output: () => output, stop }
}

/** A running edge-runtime server. */
export interface EdgeRuntimeHandle {
  readonly url: string
  stop(): Promise<void>
}

/**
 * Runs a service-worker script (`addEventListener('fetch', …)`, e.g. an `'iife'` bundle) in
 * `edge-runtime`, Vercel's Edge runtime for local use: a VM context with only the Edge globals.
 */
export async function startEdgeRuntime(code: string): Promise<EdgeRuntimeHandle> {
  const { EdgeRuntime, runServer } = requireHere('edge-runtime') as typeof import('edge-runtime')
  const runtime = new EdgeRuntime({ initialCode: code })
  const port = await freePort()
  const server = await runServer({ runtime, port, host: REDIS_HOST })
  return {
    url: `http://${REDIS_HOST}:${port}`,
    stop: () => server.close(),
  }
}
