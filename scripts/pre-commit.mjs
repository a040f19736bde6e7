#!/usr/bin/env node
/**
 * The pre-commit hook (.githooks/pre-commit): Biome on the staged files only, so it stays fast.
 * A file staged whole is formatted and safely fixed in place, then staged again; a file with unstaged
 * changes is only checked, since rewriting it would stage the changes left out on purpose. Staged Lua
 * also checks that the generated scripts module is up to date.
 */
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const BIOME_FILES = /\.(ts|mts|cts|js|mjs|cjs|json|jsonc)$/

function git(...args) {
  const r = spawnSync('git', args, { cwd: root, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`)
  return r.stdout.split('\0').filter(Boolean)
}

function run(command, args) {
  const r = spawnSync(command, args, { cwd: root, stdio: 'inherit' })
  return r.status ?? 1
}

const staged = git('diff', '--cached', '--name-only', '--diff-filter=ACMR', '-z')
const unstaged = new Set(git('diff', '--name-only', '-z'))
let failed = false

const lintable = staged.filter((f) => BIOME_FILES.test(f))
if (lintable.length > 0) {
  const biome = path.join(root, 'node_modules', '.bin', 'biome')
  if (!fs.existsSync(biome)) {
    console.error('pre-commit: Biome is not installed (run pnpm install); staged files not checked')
  } else {
    const flags = ['check', '--no-errors-on-unmatched', '--files-ignore-unknown=true']
    const whole = lintable.filter((f) => !unstaged.has(f))
    const partial = lintable.filter((f) => unstaged.has(f))
    if (whole.length > 0) {
      if (run(biome, [...flags, '--write', '--', ...whole]) !== 0) failed = true
      git('add', '--', ...whole)
    }
    if (partial.length > 0 && run(biome, [...flags, '--', ...partial]) !== 0) {
      console.error('pre-commit: partly staged files were checked, not rewritten: fix them, then stage')
      failed = true
    }
  }
}

if (staged.some((f) => f.startsWith('packages/core/lua/') || f.endsWith('src/scripts/generated.ts'))) {
  if (run(process.execPath, [path.join(root, 'scripts', 'gen-lua.mjs'), '--check']) !== 0) {
    console.error(
      'pre-commit: run `node scripts/gen-lua.mjs` and stage packages/core/src/scripts/generated.ts',
    )
    failed = true
  }
}

if (failed) {
  console.error('pre-commit: fix the above, or skip once with `git commit --no-verify`')
  process.exit(1)
}
