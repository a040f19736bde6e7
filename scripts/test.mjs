#!/usr/bin/env node
/**
 * `pnpm test`: typecheck (tsc), lint (Biome), then jest, every step run even when an earlier one fails, so
 * one run reports everything. Extra arguments go to jest (`pnpm test packages/core -t gcra`).
 *
 * The very last line printed is `N passed, N failed`, the one line CI reads: N passed/failed tests from
 * jest's JSON report, plus one failure for each suite that failed outside any test (no tests, a syntax
 * error, a throwing hook), for a failed typecheck or lint step, and for a jest run that failed without a
 * failing test or produced no report. The exit code is non-zero iff N failed > 0.
 */
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const resultsFile = path.join(root, '.tmp', 'jest-results.json')
const jestArgs = process.argv.slice(2)
if (jestArgs[0] === '--') jestArgs.shift()

/** Runs a step with inherited stdio; returns its exit code (1 when it could not run or died on a signal). */
function run(label, command, args) {
  console.log(`\n> ${label}: ${command} ${args.join(' ')}`)
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' })
  if (result.error) {
    console.error(`${label}: could not run ${command}: ${result.error.message}`)
    return 1
  }
  return result.status ?? 1
}

/**
 * Like run(), asynchronously, with a time budget: past it the command's process group is killed and the
 * answer is 'overrun'.
 */
function runWithin(label, command, args, budgetMs, env) {
  console.log(`\n> ${label}: ${command} ${args.join(' ')}`)
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: root,
      stdio: 'inherit',
      detached: true,
      env: { ...process.env, ...env },
    })
    let overrun = false
    const timer = setTimeout(() => {
      overrun = true
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }, budgetMs)
    child.on('error', (error) => {
      clearTimeout(timer)
      console.error(`${label}: could not run ${command}: ${error.message}`)
      resolve(1)
    })
    child.on('exit', (code) => {
      clearTimeout(timer)
      // What a suite left running (a child of a killed worker) would hold the run's stdout open.
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {
        // the group is empty
      }
      resolve(overrun ? 'overrun' : (code ?? 1))
    })
  })
}

const problems = []
let passed = 0
let failed = 0

for (const [label, script] of [
  ['typecheck', 'typecheck'],
  ['lint', 'lint'],
]) {
  const code = run(label, 'pnpm', ['run', '--silent', script])
  if (code !== 0) {
    failed += 1
    problems.push(`${label} failed (exit ${code})`)
  }
}

fs.mkdirSync(path.dirname(resultsFile), { recursive: true })
fs.rmSync(resultsFile, { force: true }) // never read a previous run's report
// Tests that log race tallies or expect an error to be printed stay quiet unless asked for:
// TOLLGATE_VERBOSE=1 pnpm test shows every console line.
const quiet = process.env.TOLLGATE_VERBOSE === '1' ? [] : ['--silent']
const progressFile = path.join(root, '.tmp', 'jest-progress.log')
fs.rmSync(progressFile, { force: true })
// The whole jest run has a budget: a suite that hangs (a busy loop, a child that never answers) blocks its
// worker where no test timeout can fire. Past the budget jest is stopped and the suites it was running
// are named, so the run still ends on its summary line.
const budgetS = Number(process.env.TOLLGATE_TEST_BUDGET_S ?? 1200)
const jestCode = await runWithin(
  'jest',
  'npx',
  ['jest', ...quiet, '--json', `--outputFile=${resultsFile}`, ...jestArgs],
  budgetS * 1000,
  { TOLLGATE_JEST_PROGRESS: progressFile },
)

let report
if (jestCode === 'overrun') {
  // No JSON report: count what the progress file saw, and fail every suite still running.
  const started = new Set()
  for (const line of fs.existsSync(progressFile) ? fs.readFileSync(progressFile, 'utf8').split('\n') : []) {
    const [event, file, ok, bad] = line.split(' ')
    if (event === 'start') started.add(file)
    if (event === 'end') {
      started.delete(file)
      passed += Number(ok)
      failed += Number(bad)
    }
  }
  problems.push(`jest did not finish within ${budgetS} s (TOLLGATE_TEST_BUDGET_S) and was stopped`)
  for (const file of started) problems.push(`still running when stopped: ${file}`)
  failed += Math.max(1, started.size)
} else {
  try {
    report = JSON.parse(fs.readFileSync(resultsFile, 'utf8'))
  } catch (err) {
    problems.push(`jest wrote no readable report (${err.code ?? err.message}), exit ${jestCode}`)
    failed += 1
  }
}

if (report) {
  passed += report.numPassedTests
  let jestFailures = report.numFailedTests
  for (const suite of report.testResults ?? []) {
    const failingTests = (suite.assertionResults ?? []).some((a) => a.status === 'failed')
    if (suite.status === 'failed' && !failingTests) {
      jestFailures += 1
      problems.push(`suite failed outside its tests: ${path.relative(root, suite.name)}`)
    }
  }
  if (jestCode !== 0 && jestFailures === 0) {
    jestFailures += 1
    problems.push(`jest exited ${jestCode} without a failing test`)
  }
  failed += jestFailures
}

console.log('')
for (const problem of problems) console.log(`FAILED: ${problem}`)
console.log(`${passed} passed, ${failed} failed`)
process.exitCode = failed > 0 ? 1 : 0
