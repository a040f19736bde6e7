#!/usr/bin/env node
/**
 * Root `prepare` script (runs on `pnpm install`): points git at the repository's hooks in .githooks/.
 * Silent and successful where it has nothing to do: outside a git checkout (a tarball), in CI (which never
 * commits), or when the developer already set core.hooksPath to hooks of their own.
 */
import { spawnSync } from 'node:child_process'

const git = (...args) => spawnSync('git', args, { encoding: 'utf8' })

if (!process.env.CI) {
  const inside = git('rev-parse', '--is-inside-work-tree')
  if (inside.status === 0 && inside.stdout.trim() === 'true') {
    const current = git('config', '--get', 'core.hooksPath').stdout.trim()
    if (current === '') {
      if (git('config', 'core.hooksPath', '.githooks').status === 0) {
        console.log('git hooks: core.hooksPath set to .githooks (commit-msg, pre-commit)')
      }
    } else if (current !== '.githooks') {
      console.log(`git hooks: core.hooksPath is ${current}; .githooks/ left unused`)
    }
  }
}
