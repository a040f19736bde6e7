/**
 * A jest reporter that appends one line per suite start and end to the file named by
 * TOLLGATE_JEST_PROGRESS, so `scripts/test.mjs` can name the suites still running when jest overruns its
 * time budget (a hung suite blocks its worker and no other reporter says which one).
 */
const fs = require('node:fs')
const path = require('node:path')

class ProgressReporter {
  constructor(globalConfig) {
    this.root = globalConfig.rootDir
    this.file = process.env.TOLLGATE_JEST_PROGRESS
  }
  write(line) {
    if (this.file) fs.appendFileSync(this.file, `${line}\n`)
  }
  onTestStart(test) {
    this.write(`start ${path.relative(this.root, test.path)}`)
  }
  onTestResult(test, result) {
    const failed = result.numFailingTests + (result.testExecError ? 1 : 0)
    this.write(`end ${path.relative(this.root, test.path)} ${result.numPassingTests} ${failed}`)
  }
}
module.exports = ProgressReporter
