/**
 * A race harness across OS processes. A rate limiter's atomicity bug hides inside one Node process
 * (one connection, one event loop, commands serialized) and shows only when several processes, each with
 * a warmed connection, hit Redis at the same moment. So: N child processes, set up in advance, released
 * together, each firing all its attempts in one tick; then count what Redis let through.
 *
 * A race module (a `.ts` file, loaded in each child through tsx) exports:
 * - `setup(setupArgs, ctx)`: open and warm connections (runs once per child, before the first round);
 * - `prepare?(roundArgs, ctx)`: per-round state, e.g. the key to hit;
 * - `attempt(i, ctx)`: one call; resolves `true` (admitted) or `false` (refused); a throw counts as an error;
 * - `teardown?()`: close connections.
 *
 * Arguments travel over IPC with the structured-clone ("advanced") serialization.
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { trackChild } from './cleanup'

/** Passed to every hook of a race module. */
export interface RaceContext {
  /** 0-based index of this child. */
  workerIndex: number
  /** Number of children in the race. */
  workers: number
}

/** The shape of a race module (see the module docs). */
export interface RaceModule<SetupArgs = any, RoundArgs = any> {
  setup(setupArgs: SetupArgs, ctx: RaceContext): unknown
  prepare?(roundArgs: RoundArgs, ctx: RaceContext): unknown
  attempt(i: number, ctx: RaceContext): Promise<boolean> | boolean
  teardown?(): unknown
}

/** Options for {@link startRace}. */
export interface RaceOptions {
  /** Number of child processes. */
  workers: number
  /** Absolute path of the race module (a `.ts` file). */
  module: string
  /** Passed to every child's `setup` (must survive structured cloning). */
  setupArgs?: unknown
  /**
   * Budget for each phase (start + setup, prepare, one round's attempts, close). Starting the children
   * next to other suites' own can take tens of seconds on a loaded 2-core machine; the default stays
   * under jest's hook timeout, so a child that never answers is still named. @default 50000
   */
  timeoutMs?: number
}

/** What one round let through. */
export interface RaceRoundResult {
  /** Attempts that resolved `true`, over all children. */
  admitted: number
  /** Attempts that resolved `false`. */
  refused: number
  /** Attempts that threw or resolved a non-boolean. */
  errors: number
  /** Admitted count per child, by worker index. */
  perWorker: number[]
  /** Up to 5 distinct error messages, to make a non-zero `errors` debuggable. */
  errorSamples: string[]
}

/** A set of ready children; run rounds, then close. */
export interface RaceHandle {
  readonly workers: number
  /**
   * Runs one round: every child runs `prepare(roundArgs)`; once all are prepared, all are told 'go' at
   * once, and each starts `perWorker` attempts in the same tick.
   */
  round(roundArgs: unknown, perWorker: number): Promise<RaceRoundResult>
  /** Runs every child's `teardown` and waits for the children to exit (SIGKILL after the timeout). */
  close(): Promise<void>
}

/** Parent → child messages. */
export type ToWorker =
  | { type: 'init'; module: string; setupArgs: unknown; ctx: RaceContext }
  | { type: 'prepare'; roundArgs: unknown }
  | { type: 'go'; perWorker: number }
  | { type: 'close' }

/** Child → parent messages. */
export type FromWorker =
  | { type: 'ready' }
  | { type: 'prepared' }
  | { type: 'result'; admitted: number; refused: number; errors: number; errorSamples: string[] }
  | { type: 'closed' }
  | { type: 'error'; message: string }

type Reply<T extends FromWorker['type']> = Extract<FromWorker, { type: T }>

/** The monorepo root (where tsconfig.json lives, so tsx resolves `@tollgate/*` paths there). */
export function findRepoRoot(): string {
  let dir = __dirname
  while (!fs.existsSync(path.join(dir, 'pnpm-workspace.yaml'))) {
    const parent = path.dirname(dir)
    if (parent === dir) throw new Error(`no pnpm-workspace.yaml above ${__dirname}`)
    dir = parent
  }
  return dir
}

class RaceWorker {
  private pending:
    | { expect: FromWorker['type']; resolve: (msg: FromWorker) => void; reject: (err: Error) => void }
    | undefined
  private exitError: Error | undefined
  readonly exited: Promise<void>

  constructor(
    readonly index: number,
    readonly child: ChildProcess,
    private readonly timeoutMs: number,
  ) {
    child.on('message', (msg: FromWorker) => this.onMessage(msg))
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitError = new Error(`race worker ${index} exited (${signal ?? `code ${code}`})`)
        this.fail(this.exitError)
        resolve()
      })
      child.once('error', (err) => {
        this.exitError = err
        this.fail(err)
        resolve()
      })
    })
  }

  get alive(): boolean {
    return this.exitError === undefined
  }

  private onMessage(msg: FromWorker): void {
    const pending = this.pending
    if (!pending) return
    if (msg.type === 'error') this.fail(new Error(`race worker ${this.index}: ${msg.message}`))
    else if (msg.type === pending.expect) {
      this.pending = undefined
      pending.resolve(msg)
    }
  }

  private fail(err: Error): void {
    const pending = this.pending
    this.pending = undefined
    pending?.reject(err)
  }

  /** Sends `msg` synchronously and resolves with the reply of type `expect`. */
  request<T extends FromWorker['type']>(msg: ToWorker, expect: T): Promise<Reply<T>> {
    if (this.exitError) return Promise.reject(this.exitError)
    if (this.pending)
      return Promise.reject(new Error(`race worker ${this.index} is busy (${this.pending.expect})`))
    return new Promise<Reply<T>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(new Error(`race worker ${this.index}: no '${expect}' within ${this.timeoutMs} ms`))
      }, this.timeoutMs)
      this.pending = {
        expect,
        resolve: (m) => {
          clearTimeout(timer)
          resolve(m as Reply<T>)
        },
        reject: (e) => {
          clearTimeout(timer)
          reject(e)
        },
      }
      // With a callback, a closed channel reports here instead of as an unhandled 'error' event.
      if (!this.child.connected) this.fail(new Error(`race worker ${this.index}: IPC channel closed`))
      else this.child.send(msg, (err) => err && this.fail(err))
    })
  }

  async close(): Promise<void> {
    // A child that cannot take 'close' (busy in a round, or timed out) gets no grace period.
    const closing =
      this.alive &&
      (await this.request({ type: 'close' }, 'closed').then(
        () => true,
        () => false,
      ))
    if (!closing && this.alive) this.child.kill('SIGKILL')
    let timer: NodeJS.Timeout | undefined
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.timeoutMs)
    })
    await Promise.race([this.exited, grace])
    clearTimeout(timer)
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL')
    await this.exited
  }
}

/**
 * Spawns `opts.workers` children (`node --import tsx race-worker.ts`, cwd = the repo root), has each import
 * `opts.module` and run its `setup(opts.setupArgs)`, and resolves once all are ready. If any child fails to
 * start, all are killed and the error (with the module's message) is thrown.
 */
export async function startRace(opts: RaceOptions): Promise<RaceHandle> {
  if (!Number.isInteger(opts.workers) || opts.workers < 1)
    throw new Error('workers must be a positive integer')
  if (!path.isAbsolute(opts.module)) throw new Error(`race module must be an absolute path: ${opts.module}`)
  const timeoutMs = opts.timeoutMs ?? 50_000
  const root = findRepoRoot()
  const workerFile = path.join(__dirname, 'race-worker.ts')
  const workers: RaceWorker[] = []
  for (let i = 0; i < opts.workers; i++) {
    const child = spawn(process.execPath, ['--import', 'tsx', workerFile], {
      cwd: root,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
    })
    trackChild(child)
    workers.push(new RaceWorker(i, child, timeoutMs))
  }
  const closeAll = () => Promise.all(workers.map((w) => w.close())).then(() => undefined)
  try {
    await Promise.all(
      workers.map((w) =>
        w.request(
          {
            type: 'init',
            module: opts.module,
            setupArgs: opts.setupArgs,
            ctx: { workerIndex: w.index, workers: opts.workers },
          },
          'ready',
        ),
      ),
    )
  } catch (err) {
    for (const w of workers) if (w.alive) w.child.kill('SIGKILL')
    await closeAll()
    throw err
  }

  let closed = false
  return {
    workers: opts.workers,
    async round(roundArgs, perWorker) {
      if (closed) throw new Error('race is closed')
      if (!Number.isInteger(perWorker) || perWorker < 0)
        throw new Error('perWorker must be a non-negative integer')
      await Promise.all(workers.map((w) => w.request({ type: 'prepare', roundArgs }, 'prepared')))
      // One synchronous loop: the 'go' messages leave back to back.
      const replies = await Promise.all(workers.map((w) => w.request({ type: 'go', perWorker }, 'result')))
      const samples = new Set(replies.flatMap((r) => r.errorSamples))
      return {
        admitted: replies.reduce((n, r) => n + r.admitted, 0),
        refused: replies.reduce((n, r) => n + r.refused, 0),
        errors: replies.reduce((n, r) => n + r.errors, 0),
        perWorker: replies.map((r) => r.admitted),
        errorSamples: [...samples].slice(0, 5),
      }
    },
    async close() {
      if (closed) return
      closed = true
      await closeAll()
    },
  }
}
