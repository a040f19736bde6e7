/**
 * The JavaScript runtimes some tests run in (workerd, Bun, Deno). They are large native binaries, so they
 * are not part of the workspace install: `pnpm install:runtimes` installs them into `runtimes/` (its own
 * package.json and lockfile). In CI (`CI=true`) a missing runtime fails the test that needs it; elsewhere
 * the test is skipped with a message naming the install command.
 * @module
 */
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'

/** The repository root (this file is packages/testkit/src/runtimes.ts). */
const ROOT = path.resolve(__dirname, '../../..')
/** The separate install of the runtimes. */
export const RUNTIMES_DIR = path.join(ROOT, 'runtimes')
/** What a contributor runs to get them. */
export const RUNTIMES_INSTALL = 'pnpm install:runtimes'

export type RuntimeName = 'workerd' | 'bun' | 'deno'

const ENV_VAR: Record<RuntimeName, string> = { workerd: 'WORKERD_BIN', bun: 'BUN_BIN', deno: 'DENO_BIN' }

/**
 * The runtime's executable: `WORKERD_BIN` / `BUN_BIN` / `DENO_BIN`, then the `runtimes/` install, then
 * `PATH`. For workerd it is the binary inside its platform package, not `bin/workerd` (a Node shim that
 * spawns it: killing the shim left workerd running).
 */
export function findRuntime(name: RuntimeName): string | undefined {
  const fromEnv = process.env[ENV_VAR[name]]
  if (fromEnv) return fromEnv
  const modules = path.join(RUNTIMES_DIR, 'node_modules')
  if (name === 'workerd') {
    try {
      const file = (createRequire(path.join(RUNTIMES_DIR, 'package.json'))('workerd') as { default: string })
        .default
      if (fs.existsSync(file)) return file
    } catch {
      // not installed there: PATH below
    }
  } else {
    const file = path.join(
      modules,
      name === 'bun' ? '@oven/bun-linux-x64/bin/bun' : '@deno/linux-x64-glibc/deno',
    )
    if (fs.existsSync(file)) return file
  }
  try {
    return (
      execFileSync('which', [name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() ||
      undefined
    )
  } catch {
    return undefined
  }
}

const missing = (name: RuntimeName) =>
  `${name} is not installed: run \`${RUNTIMES_INSTALL}\` (or set ${ENV_VAR[name]} to its executable)`

/** {@link findRuntime}, or an error naming the install command (for scripts: the Workers example, benchmarks). */
export function runtimeBin(name: RuntimeName): string {
  const bin = findRuntime(name)
  if (!bin) throw new Error(missing(name))
  return bin
}

/**
 * For a test file, at collection time: the runtime's executable, or undefined when it is missing outside
 * CI (after a warning naming the install command: skip the tests). With `CI=true` a missing runtime
 * throws, so the suite fails instead of passing without having run.
 */
export function runtimeForTests(name: RuntimeName): string | undefined {
  const bin = findRuntime(name)
  if (bin) return bin
  if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(`${missing(name)} (CI=true)`)
  console.warn(`[testkit] ${missing(name)}: its tests are skipped`)
  return undefined
}
