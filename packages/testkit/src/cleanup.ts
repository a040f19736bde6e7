/**
 * One process-wide registry of the children this kit spawns, so that none outlives the process that
 * started it: a redis-server left behind holds its port and memory and makes the next run flaky.
 * @module
 */
import type { ChildProcess } from 'node:child_process'
import fs from 'node:fs'

const children = new Set<ChildProcess>()
const dirs = new Set<string>()
let installed = false

const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP']

function killAll(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill('SIGKILL')
      } catch {
        // already gone
      }
    }
  }
  children.clear()
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
  dirs.clear()
}

function onSignal(signal: NodeJS.Signals): void {
  killAll()
  // A signal handler replaces the default "terminate"; keep that default when nobody else handles it.
  if (process.listenerCount(signal) === 1) {
    process.removeListener(signal, onSignal)
    process.kill(process.pid, signal)
  }
}

function install(): void {
  if (installed) return
  installed = true
  process.on('exit', killAll)
  for (const signal of SIGNALS) process.on(signal, onSignal)
}

/**
 * Registers a child to be SIGKILLed when this process exits or is terminated by SIGINT/SIGTERM/SIGHUP.
 * The hooks are installed once, on first use. (A SIGKILLed parent cannot clean up: nothing can.)
 */
export function trackChild(child: ChildProcess): void {
  install()
  children.add(child)
  child.once('exit', () => children.delete(child))
}

/** Registers a temporary directory to be removed at exit, unless {@link untrackDir} came first. */
export function trackDir(dir: string): void {
  install()
  dirs.add(dir)
}

/** Forgets a directory that its owner removed itself. */
export function untrackDir(dir: string): void {
  dirs.delete(dir)
}
