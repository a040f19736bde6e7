/**
 * The public packages as npm users get them: packed with `pnpm pack`, which runs each package's `prepack`
 * (the build), applies `publishConfig` and turns `workspace:` ranges into versions. Packing rewrites
 * `dist/`, so it happens under one lock across jest workers, once per run.
 * @module
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import { trackDir } from './cleanup'

const run = promisify(execFile)
const ROOT = path.resolve(__dirname, '../../..')

/** The directories under packages/ that publish to npm, dependencies first. */
export const PUBLIC_PACKAGES = [
  'core',
  'http',
  'express',
  'fastify',
  'hono',
  'fetch',
  'nestjs',
  'prometheus',
  'opentelemetry',
  'cli',
  'mcp',
  'websocket',
  'graphql',
] as const
export type PublicPackage = (typeof PUBLIC_PACKAGES)[number]

/** Runs a command; on failure the error carries its output (an npm or tsc error is the diagnosis). */
export async function sh(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run(command, args, { cwd, env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 })
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string }
    throw new Error(
      `${command} ${args.join(' ')} (in ${cwd}) failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`,
    )
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Runs `fn` holding the workspace's build lock (a directory under .tmp/, with the holder's pid: a lock
 * left by a process that died is taken over).
 */
export async function withBuildLock<T>(fn: () => Promise<T>, timeoutMs = 600_000): Promise<T> {
  const lock = path.join(ROOT, '.tmp', 'build.lock')
  fs.mkdirSync(path.dirname(lock), { recursive: true })
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      fs.mkdirSync(lock)
      fs.writeFileSync(path.join(lock, 'pid'), String(process.pid))
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      let holder = Number.NaN
      try {
        holder = Number(fs.readFileSync(path.join(lock, 'pid'), 'utf8'))
      } catch {
        // created but its pid not written yet: wait
      }
      if (Number.isInteger(holder) && holder > 0 && !alive(holder)) {
        fs.rmSync(lock, { recursive: true, force: true })
        continue
      }
      if (Date.now() > deadline) throw new Error(`the build lock ${lock} is held by pid ${holder}`)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
  try {
    return await fn()
  } finally {
    fs.rmSync(lock, { recursive: true, force: true })
  }
}

/** Where this jest run keeps its tarballs (shared by its workers), or undefined outside a jest run. */
function runPacksDir(): string | undefined {
  const id = process.env.TOLLGATE_RUN_ID
  return id ? path.join(ROOT, '.tmp', 'packs', id.replace(/[^\w.-]/g, '_')) : undefined
}

/** Deletes the tarballs of this run (jest's globalTeardown). */
export function removeRunPacks(): void {
  const dir = runPacksDir()
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
}

/**
 * The workspace's pnpm (its `packageManager`): the one on PATH when it is that version (CI installs it),
 * else through npx.
 */
async function pnpmCommand(): Promise<[string, string[]]> {
  const pinned: string = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).packageManager
  try {
    const { stdout } = await run('pnpm', ['--version'])
    if (`pnpm@${stdout.trim()}` === pinned) return ['pnpm', []]
  } catch {
    // no pnpm on PATH
  }
  return ['npx', ['-y', pinned]]
}

/**
 * Every public package packed from a clean tree (no `dist/`, no generated `lua/*.lua`), so each tarball
 * is what its `prepack` built; answers each package's tarball path. Within one jest run the packages are
 * packed once, by the first suite that asks, into a folder the run's workers share. Core goes first (its
 * prepack writes the Lua files); the others, which build from their siblings' sources, two at a time:
 * the suite waiting for the lock leaves its worker's core free.
 */
export async function packPublicPackages(): Promise<Record<PublicPackage, string>> {
  let dest = runPacksDir()
  if (!dest) {
    fs.mkdirSync(path.join(ROOT, '.tmp'), { recursive: true })
    dest = fs.mkdtempSync(path.join(ROOT, '.tmp', 'packs-'))
    trackDir(dest)
  }
  const index = path.join(dest, 'tarballs.json')
  return withBuildLock(async () => {
    if (fs.existsSync(index)) return JSON.parse(fs.readFileSync(index, 'utf8'))
    fs.mkdirSync(dest, { recursive: true })
    const [pnpm, pre] = await pnpmCommand()
    const tarballs = {} as Record<PublicPackage, string>
    const pack = async (name: PublicPackage) => {
      const dir = path.join(ROOT, 'packages', name)
      fs.rmSync(path.join(dir, 'dist'), { recursive: true, force: true })
      const lua = path.join(dir, 'lua')
      for (const f of fs.existsSync(lua) ? fs.readdirSync(lua) : []) {
        if (f.endsWith('.lua')) fs.rmSync(path.join(lua, f))
      }
      const { stdout } = await sh(pnpm, [...pre, 'pack', '--pack-destination', dest], dir)
      const file = stdout.trim().split('\n').pop()!.trim()
      tarballs[name] = path.isAbsolute(file) ? file : path.join(dest, path.basename(file))
    }
    const [first, ...rest] = PUBLIC_PACKAGES
    await pack(first)
    let next = 0
    const lane = async () => {
      while (next < rest.length) await pack(rest[next++]!)
    }
    await Promise.all([lane(), lane()])
    fs.writeFileSync(index, JSON.stringify(tarballs))
    return tarballs
  })
}
