/**
 * Jest's test sequencer, with the slow suites first also where jest has no timings of its own (a fresh
 * clone in CI sorts by file size, which starts a short file of long tests last and leaves a worker idle at
 * the end). A suite's expected time is jest's cached duration, else the list below, else nothing (after
 * every listed suite, the larger file first). Failed suites still go first.
 */
const path = require('node:path')

/** jest's own sequencer, found through jest (pnpm does not hoist it to the root). */
function jestSequencer() {
  const from = (name, dir) => path.dirname(require.resolve(`${name}/package.json`, { paths: [dir] }))
  const jest = from('jest', __dirname)
  const core = from('@jest/core', jest)
  const config = from('jest-config', core)
  return require(from('@jest/test-sequencer', config)).default
}

/**
 * Seconds of worker time per suite, from a full run on a loaded 2-core machine: only the order matters.
 * Paths are relative to the repository root; a suite missing here is taken as short.
 */
const EXPECTED_S = {
  'smoke/registry.test.ts': 330,
  'packages/core/test/cluster-race.test.ts': 184,
  'packages/core/test/conformance.test.ts': 130,
  'packages/core/src/stores/redis/http-client.test.ts': 118,
  'packages/core/test/outage-charges.test.ts': 115,
  'packages/cli/test/cli.test.ts': 107,
  'packages/core/test/scripts/python-contract.test.ts': 86,
  'packages/core/test/memory-bounds.test.ts': 81,
  'smoke/doc-blocks.test.ts': 75,
}

const Sequencer = jestSequencer()

class SlowFirstSequencer extends Sequencer {
  sort(tests) {
    const root = path.resolve(__dirname, '..')
    const expected = (test) => {
      const cached = this.time(test)
      if (cached != null) return cached
      const listed = EXPECTED_S[path.relative(root, test.path).split(path.sep).join('/')]
      return listed == null ? undefined : listed * 1000
    }
    const size = (test) => test.context.hasteFS.getSize(test.path) ?? 0
    for (const test of tests) test.duration = expected(test)
    return tests.sort((a, b) => {
      const failedA = this.hasFailed(a)
      if (failedA !== this.hasFailed(b)) return failedA ? -1 : 1
      const da = a.duration ?? -1
      const db = b.duration ?? -1
      if (da !== db) return db - da
      return size(b) - size(a)
    })
  }
}

module.exports = SlowFirstSequencer
