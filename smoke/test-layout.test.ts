/**
 * A test of one source file sits beside it and is named after it: `packages/*\/src/**\/NAME.test.ts` (or
 * `NAME.ASPECT.test.ts`, for a source whose tests would pass 400 lines in one file) needs `NAME.ts` in the
 * same folder, so a source's tests are found by its name and a renamed source cannot leave its tests behind.
 * Whole-system suites (races, faults, conformance, processes) live in `packages/*\/test/`.
 */
import fs from 'node:fs'
import path from 'node:path'

const root = path.resolve(__dirname, '..')

function testsUnder(dir: string): string[] {
  const found: string[] = []
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name)
    if (e.isDirectory()) found.push(...testsUnder(full))
    else if (e.name.endsWith('.test.ts')) found.push(full)
  }
  return found
}

/** The test files under a package's src/ whose source (the name up to its first dot) is not beside them. */
function orphanTests(packagesDir: string): string[] {
  const orphans: string[] = []
  for (const pkg of fs.readdirSync(packagesDir)) {
    const src = path.join(packagesDir, pkg, 'src')
    if (!fs.existsSync(src)) continue
    for (const file of testsUnder(src)) {
      const name = path.basename(file).split('.')[0]
      if (!fs.existsSync(path.join(path.dirname(file), `${name}.ts`))) {
        orphans.push(path.relative(packagesDir, file))
      }
    }
  }
  return orphans.sort()
}

describe('test layout', () => {
  it('every test under packages/*/src has its source file beside it', () => {
    expect(orphanTests(path.join(root, 'packages'))).toEqual([])
  })

  it('catches a test whose source is missing', () => {
    const dir = fs.mkdtempSync(path.join(root, '.tmp-layout-'))
    try {
      fs.mkdirSync(path.join(dir, 'a', 'src', 'deep'), { recursive: true })
      fs.writeFileSync(path.join(dir, 'a', 'src', 'deep', 'kept.ts'), '')
      fs.writeFileSync(path.join(dir, 'a', 'src', 'deep', 'kept.test.ts'), '')
      fs.writeFileSync(path.join(dir, 'a', 'src', 'deep', 'kept.aspect.test.ts'), '')
      fs.writeFileSync(path.join(dir, 'a', 'src', 'gone.test.ts'), '')
      expect(orphanTests(dir)).toEqual([path.join('a', 'src', 'gone.test.ts')])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
