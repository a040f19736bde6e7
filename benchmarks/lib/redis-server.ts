/**
 * A throwaway redis-server for one benchmark run: a free port on 127.0.0.1, no persistence, its own temp
 * dir, killed when this process exits (normally, on an uncaught error, or on Ctrl-C). Never the shared 6379.
 *
 * (Kept here rather than taken from @tollgate/testkit so the benchmark only depends on @tollgate/core.)
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

export interface BenchRedis {
  readonly port: number
  readonly url: string
  readonly pid: number
  stop(): Promise<void>
}

/** A port that is free right now (bind :0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      if (addr === null || typeof addr === 'string') return reject(new Error('no port'))
      srv.close(() => resolve(addr.port))
    })
  })
}

/** Resolves when something answers `PING` with `+PONG` on the port. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1')
    const done = (ok: boolean) => {
      sock.destroy()
      resolve(ok)
    }
    sock.setTimeout(500, () => done(false))
    sock.once('error', () => done(false))
    sock.once('connect', () => sock.write('PING\r\n'))
    sock.once('data', (d) => done(d.toString().startsWith('+PONG')))
  })
}

const live = new Map<ChildProcess, string>() // child -> its temp dir
let hooked = false
function hookExit(): void {
  if (hooked) return
  hooked = true
  const killAll = () => {
    for (const [c, dir] of live) {
      c.kill('SIGKILL')
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  process.once('exit', killAll)
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      killAll()
      process.exit(130)
    })
  }
}

/** Starts `redis-server` (must be on PATH) and waits until it answers PING (10 s at most). */
export async function startBenchRedis(extraArgs: string[] = []): Promise<BenchRedis> {
  hookExit()
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-bench-redis-'))
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
        ...extraArgs,
      ],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    )
    live.set(child, dir)
    let out = ''
    child.stdout?.on('data', (d) => (out = (out + d).slice(-4000)))
    child.stderr?.on('data', (d) => (out = (out + d).slice(-4000)))
    let exited = false
    const gone = new Promise<void>((resolve) => {
      child.once('exit', () => resolve())
      child.once('error', (err) => {
        out += String(err)
        resolve()
      })
    }).then(() => {
      exited = true
      live.delete(child)
      fs.rmSync(dir, { recursive: true, force: true })
    })
    const deadline = Date.now() + 10_000
    while (!exited && Date.now() < deadline && !(await ping(port)))
      await new Promise((r) => setTimeout(r, 25))
    if (!exited && Date.now() < deadline) {
      return {
        port,
        url: `redis://127.0.0.1:${port}`,
        pid: child.pid ?? -1,
        async stop() {
          if (!exited) child.kill('SIGTERM')
          const t = setTimeout(() => child.kill('SIGKILL'), 3000)
          await gone
          clearTimeout(t)
        },
      }
    }
    child.kill('SIGKILL')
    await gone
    if (!/address already in use/i.test(out) || attempt >= 3) {
      throw new Error(`redis-server did not start on port ${port}:\n${out.trim()}`)
    }
  }
}
