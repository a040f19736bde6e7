import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { Measurement } from './measure'
import type { Variant } from './variants'

const FILE = fileURLToPath(new URL('./variant-process.mts', import.meta.url))

/** A variant running in its own Node process (variant-process.mts), measured on request. */
export interface Isolated {
  measure(options: { durationMs: number; concurrency: number }): Promise<Measurement>
  stop(): void
}

/**
 * Starts `v` in a process of its own, on the same Node flags (the build's package resolution) and
 * environment as this one, and resolves once its client is connected.
 */
export async function isolate(v: Variant, redisUrl: string): Promise<Isolated> {
  const child: ChildProcess = fork(FILE, [v.id, redisUrl], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const next = <T>() =>
    new Promise<T>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`${v.id}: its process exited (${code})`))
      child.once('exit', onExit)
      child.once('message', (m) => {
        child.off('exit', onExit)
        resolve(m as T)
      })
    })
  await next<'ready'>()
  return {
    measure(options) {
      const reply = next<Measurement>()
      child.send(options)
      return reply
    },
    stop() {
      child.disconnect()
    },
  }
}
