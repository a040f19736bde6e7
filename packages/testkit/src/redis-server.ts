/**
 * Throwaway `redis-server` processes for tests: each on its own free port, in its own temp dir, without
 * persistence, so a test can kill, restart, pause or flush it without touching anybody else's Redis
 * (in particular the shared one on 6379).
 * @module
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { trackChild, trackDir, untrackDir } from './cleanup'
import { respCommand } from './resp'

/** Every server this kit starts binds here only: tests never need to be reachable from elsewhere. */
export const REDIS_HOST = '127.0.0.1'

const DEFAULT_START_TIMEOUT_MS = 10_000
const STOP_GRACE_MS = 5_000
const OUTPUT_TAIL_CHARS = 8_000
const PORT_ATTEMPTS = 5

/**
 * Asks the OS for a port that is free right now (bind port 0 on 127.0.0.1, read it, close).
 *
 * Another process can still take the port before it is used; {@link startRedisServer} detects that and
 * retries on a new port when it chose the port itself.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.once('error', reject)
    server.listen(0, REDIS_HOST, () => {
      const address = server.address()
      if (address === null || typeof address === 'string') {
        server.close()
        reject(new Error('could not read the port the OS assigned'))
        return
      }
      server.close(() => resolve(address.port))
    })
  })
}

/**
 * `count` ports free right now, all different: two {@link freePort} calls in a row may well return the
 * same port, each free when asked.
 */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = []
  while (ports.length < count) {
    const port = await freePort()
    if (!ports.includes(port)) ports.push(port)
  }
  return ports
}

/**
 * Why a redis-server did not come up, with its last output: a bare "timeout" hides the real cause
 * (a bad directive, a port taken, a missing binary).
 */
export class RedisStartError extends Error {
  override name = 'RedisStartError'
  constructor(
    message: string,
    /** The tail of the server's stdout and stderr. */
    readonly output: string,
    /** True when the port was taken between choosing it and binding it: worth a retry on another port. */
    readonly addressInUse: boolean,
  ) {
    super(output ? `${message}\n--- redis-server output (tail) ---\n${output}` : message)
  }
}

/** Options for {@link startRedisServer}. */
export interface RedisServerOptions {
  /** Port to listen on. @default a free port from {@link freePort} */
  port?: number
  /** Extra `redis-server` arguments, appended last (so they override the defaults), e.g. `['--maxmemory', '1mb']`. */
  args?: string[]
  /** How long to wait for the server to answer PING. @default 10000 */
  startTimeoutMs?: number
  /**
   * Keep the working directory across {@link RedisServerHandle.kill} and {@link RedisServerHandle.start},
   * so a restarted cluster node finds its `nodes.conf` (its id, epoch and slots). The dataset is still
   * empty on restart (no RDB, no AOF). The directory goes with {@link RedisServerHandle.stop}.
   * @default false
   */
  keepDir?: boolean
}

/** A running (or stopped) redis-server owned by the test that started it. */
export interface RedisServerHandle {
  /** Always `127.0.0.1`. */
  readonly host: string
  readonly port: number
  /** `redis://127.0.0.1:<port>`, ready for `createClient({ url })` or `new Redis(url)`. */
  readonly url: string
  /** Pid of the current process (of the last one, once stopped). Changes on every {@link start}. */
  readonly pid: number
  /** Whether the process is alive. */
  readonly running: boolean
  /** SIGTERM, then wait for the process to exit (SIGKILL after 5 s). Resolves at once if not running. */
  stop(): Promise<void>
  /** SIGKILL, then wait for exit: a crash, as clients see it. Resolves at once if not running. */
  kill(): Promise<void>
  /** (Re)starts on the same port with an empty dataset and script cache. Rejects if already running. */
  start(): Promise<void>
  /**
   * Runs one command through `redis-cli -e -p <port>` and resolves with its stdout, trimmed. Rejects on an
   * error reply or when the server is unreachable. Handy for `SCRIPT FLUSH`, `CLIENT PAUSE 500`,
   * `DEBUG SLEEP 1` (the DEBUG command is enabled for local connections), `CONFIG SET …`.
   */
  command(...args: string[]): Promise<string>
}

interface Spawned {
  child: ChildProcess
  dir: string
  /** Resolves once the process is gone (or failed to spawn); never rejects. */
  exited: Promise<void>
  /** Resolves once its stdio is closed too, so {@link Spawned.output} is complete. */
  drained: Promise<void>
  isAlive(): boolean
  output(): string
  spawnError(): Error | undefined
}

function baseArgs(port: number): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    REDIS_HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    // Redis 7 disables DEBUG by default; fault tests need DEBUG SLEEP.
    '--enable-debug-command',
    'local',
  ]
}

function onPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const file = path.join(dir, command)
    try {
      fs.accessSync(file, fs.constants.X_OK)
      return file
    } catch {
      // not here
    }
  }
  return undefined
}

/**
 * On Linux, `setpriv --pdeathsig SIGKILL` (util-linux) execs redis-server with a parent-death signal, so
 * the server dies even when this process is SIGKILLed and no exit hook can run. The pid stays the same.
 */
const SETPRIV = process.platform === 'linux' ? onPath('setpriv') : undefined

function spawnRedis(port: number, args: readonly string[], keptDir?: string): Spawned {
  const dir = keptDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-redis-'))
  trackDir(dir)
  const argv = ['redis-server', ...baseArgs(port), ...args]
  const [command, ...rest] = SETPRIV ? [SETPRIV, '--pdeathsig', 'SIGKILL', '--', ...argv] : argv
  const child = spawn(command!, rest, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  trackChild(child)
  let tail = ''
  const append = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS)
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  let alive = true
  let spawnError: Error | undefined
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    child.once('error', (err) => {
      spawnError = err
      resolve()
    })
  }).then(() => {
    alive = false
    if (keptDir) return
    fs.rmSync(dir, { recursive: true, force: true })
    untrackDir(dir)
  })
  const drained = new Promise<void>((resolve) => {
    child.once('close', () => resolve())
    child.once('error', () => resolve())
  })
  return {
    child,
    dir,
    exited,
    drained,
    isAlive: () => alive,
    output: () => tail.trim(),
    spawnError: () => spawnError,
  }
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Polls PING until `+PONG`, then checks the server that answered is our child (not a port thief). */
async function waitReady(port: number, proc: Spawned, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (!proc.isAlive()) {
      const err = proc.spawnError()
      if (err) {
        const hint = (err as NodeJS.ErrnoException).code === 'ENOENT' ? ' (is redis-server on PATH?)' : ''
        throw new RedisStartError(`redis-server could not be spawned: ${err.message}${hint}`, '', false)
      }
      // 'exit' can precede the last stdout chunk; wait briefly for it (a forked child may hold the pipe).
      await Promise.race([proc.drained, delay(250)])
      const out = proc.output()
      throw new RedisStartError(
        `redis-server on port ${port} exited before answering PING (exit ${proc.child.exitCode ?? proc.child.signalCode})`,
        out,
        /address already in use/i.test(out),
      )
    }
    try {
      if ((await respCommand(port, ['PING'], { timeoutMs: 1000 })) === 'PONG') {
        const info = await respCommand(port, ['INFO', 'server'], { timeoutMs: 1000 })
        const pid = /process_id:(\d+)/.exec(String(info))?.[1]
        if (Number(pid) === proc.child.pid) return
        // Another server holds the port; ours will fail to bind and exit: loop to report that.
        await Promise.race([proc.exited, delay(200)])
        if (proc.isAlive()) {
          throw new RedisStartError(`port ${port} is answered by another redis-server (pid ${pid})`, '', true)
        }
        continue
      }
    } catch (err) {
      if (err instanceof RedisStartError) throw err
      // not listening yet, or LOADING: poll again
    }
    if (Date.now() > deadline) {
      throw new RedisStartError(
        `redis-server on port ${port} did not answer PING within ${timeoutMs} ms`,
        proc.output(),
        false,
      )
    }
    await Promise.race([proc.exited, delay(20)])
  }
}

async function terminate(proc: Spawned, signal: NodeJS.Signals): Promise<void> {
  if (!proc.isAlive()) return
  proc.child.kill(signal)
  if (signal !== 'SIGKILL') {
    let timer: NodeJS.Timeout | undefined
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, STOP_GRACE_MS)
    })
    await Promise.race([proc.exited, grace])
    clearTimeout(timer)
    if (proc.isAlive()) proc.child.kill('SIGKILL')
  }
  await proc.exited
}

/**
 * Runs `redis-cli -e` against a port. `-e` makes an error reply a non-zero exit, which without it
 * redis-cli (when stdout is not a TTY) prints as if it were a plain string.
 */
export function redisCli(port: number, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'redis-cli',
      ['-e', '-h', REDIS_HOST, '-p', String(port), ...args],
      { maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          const detail = `${stdout}${stderr}`.trim() || err.message
          reject(new Error(`redis-cli -p ${port} ${args.join(' ')} failed: ${detail}`))
        } else {
          resolve(stdout.trim())
        }
      },
    )
  })
}

class RedisServer implements RedisServerHandle {
  readonly host = REDIS_HOST
  readonly url: string
  private proc: Spawned | undefined
  /** The working directory kept across restarts (`keepDir`), once created. */
  private dir: string | undefined

  constructor(
    readonly port: number,
    private readonly args: readonly string[],
    private readonly startTimeoutMs: number,
    private readonly keepDir: boolean,
  ) {
    this.url = `redis://${REDIS_HOST}:${port}`
  }

  get pid(): number {
    return this.proc?.child.pid ?? -1
  }

  get running(): boolean {
    return this.proc?.isAlive() ?? false
  }

  async start(): Promise<void> {
    if (this.running)
      throw new Error(`redis-server on port ${this.port} is already running (pid ${this.pid})`)
    if (this.keepDir) this.dir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-redis-'))
    const proc = spawnRedis(this.port, this.args, this.dir)
    this.proc = proc
    try {
      await waitReady(this.port, proc, this.startTimeoutMs)
    } catch (err) {
      await terminate(proc, 'SIGKILL')
      throw err
    }
  }

  async stop(): Promise<void> {
    if (this.proc) await terminate(this.proc, 'SIGTERM')
    if (this.dir) {
      fs.rmSync(this.dir, { recursive: true, force: true })
      untrackDir(this.dir)
      this.dir = undefined
    }
  }

  async kill(): Promise<void> {
    if (this.proc) await terminate(this.proc, 'SIGKILL')
  }

  command(...args: string[]): Promise<string> {
    return redisCli(this.port, args)
  }
}

/**
 * Starts `redis-server --port P --bind 127.0.0.1 --save '' --appendonly no --daemonize no
 * --enable-debug-command local` plus `opts.args`, in a fresh temp dir, and resolves once it answers PING.
 *
 * Without `opts.port`, a free port is chosen, and another one if the first is taken before Redis binds it.
 * The process is killed when this process exits; call `stop()` when done anyway.
 */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServerHandle> {
  const timeout = opts.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
  const args = opts.args ?? []
  for (let attempt = 1; ; attempt++) {
    const server = new RedisServer(opts.port ?? (await freePort()), args, timeout, opts.keepDir === true)
    try {
      await server.start()
      return server
    } catch (err) {
      await server.stop() // a kept directory goes with the failed attempt
      const retry = err instanceof RedisStartError && err.addressInUse && opts.port === undefined
      if (!retry || attempt >= PORT_ATTEMPTS) throw err
    }
  }
}
