/**
 * Starts `http-server.mts` as a child process (its own event loop, so the load generator and the server do
 * not share one), and talks to it over IPC. Children are killed when this process exits.
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { childConditions } from './build'
import type { Framework } from './http-apps.mts'
import type { ServerEvents, Variant } from './http-variants.mts'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(HERE, '..', '..')
const ENTRY = path.join(HERE, 'http-server.mts')

export interface ServerProcess {
  readonly framework: Framework
  readonly variant: Variant
  readonly port: number
  readonly url: string
  readonly pid: number
  /** The app-wide limiter's name, as the server reports it. */
  readonly limiter: string
  /** The limiter events counted so far (Tollgate variants; zeros for the others). */
  events(): Promise<ServerEvents>
  stop(): Promise<void>
}

const live = new Set<ChildProcess>()
let hooked = false
function hookExit(): void {
  if (hooked) return
  hooked = true
  process.once('exit', () => {
    for (const c of live) c.kill('SIGKILL')
  })
}

/** Spawns one server and resolves once it listens (120 s at most: tsx compiles on first start, slowly on a busy machine). */
export function startServer(
  framework: Framework,
  variant: Variant,
  redisUrl: string,
  prefix: string,
): Promise<ServerProcess> {
  hookExit()
  const child = spawn(process.execPath, [...childConditions, '--import', 'tsx', ENTRY], {
    cwd: ROOT,
    env: {
      ...process.env,
      HTTP_FRAMEWORK: framework,
      HTTP_VARIANT: variant,
      REDIS_URL: redisUrl,
      HTTP_PREFIX: prefix,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  live.add(child)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  exited.then(() => live.delete(child))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${framework}/${variant} server did not start within 120 s`))
    }, 120_000)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      reject(new Error(`${framework}/${variant} server exited (code ${code}, signal ${signal})`))
    })
    child.once('message', (msg: { type: string; port: number; limiter: string; pid: number }) => {
      clearTimeout(timer)
      if (msg.type !== 'ready') return reject(new Error(`unexpected message ${JSON.stringify(msg)}`))
      resolve({
        framework,
        variant,
        port: msg.port,
        url: `http://127.0.0.1:${msg.port}`,
        pid: msg.pid,
        limiter: msg.limiter,
        events: () =>
          new Promise((res) => {
            child.once('message', (m: { type: string; events: ServerEvents }) => res(m.events))
            child.send({ type: 'stats' })
          }),
        async stop() {
          if (child.exitCode === null && child.signalCode === null) {
            child.send({ type: 'stop' })
            const t = setTimeout(() => child.kill('SIGKILL'), 3000)
            await exited
            clearTimeout(t)
          }
        },
      })
    })
  })
}
