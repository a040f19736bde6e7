/**
 * The commit-msg hook's checker (scripts/check-commit-msg.mjs), run as git runs it: on a message file,
 * exit 0 to accept, 1 with the reason to refuse. The hooks are installed by the root `prepare` script.
 */
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const root = path.join(__dirname, '..')
const checker = path.join(root, 'scripts', 'check-commit-msg.mjs')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'commit-msg-'))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

function check(message: string): { status: number | null; stderr: string } {
  const file = path.join(dir, 'COMMIT_EDITMSG')
  fs.writeFileSync(file, message)
  const r = spawnSync(process.execPath, [checker, file], { encoding: 'utf8' })
  return { status: r.status, stderr: r.stderr }
}

describe('commit-msg checker', () => {
  it.each([
    'core: the deny cache keeps its entries until their retry time',
    'docs: benchmarks.md shows the current run only',
    'deps: redis 6.3.1',
    `lua: ${'x'.repeat(67)}`,
    'Merge branch fix/x into main',
    'fixup! core: a subject that the fixup repeats and may make longer than the limit allows',
    'squash! docs: earlier subject',
    '# a comment git strips\n\nstores: the subject is the first line that is not a comment\n\nbody\n',
  ])('accepts %j', (message) => {
    expect(check(message)).toEqual({ status: 0, stderr: '' })
  })

  it.each([
    ['no area', 'fix the deny cache', /not of the form/],
    ['an unknown area', 'frontend: a new button', /"frontend" is not an area/],
    ['a capitalised area', 'Core: the deny cache', /not of the form/],
    ['no space after the colon', 'core:the deny cache', /not of the form/],
    ['nothing after the area', 'core: ', /not of the form/],
    ['73 characters', `lua: ${'x'.repeat(68)}`, /73 characters; at most 72/],
    ['an empty message', '# only comments\n\n', /empty/],
  ])('refuses %s', (_, message, reason) => {
    const r = check(message)
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(reason)
  })

  it('the hooks are executable and installed by the root prepare script', () => {
    for (const hook of ['commit-msg', 'pre-commit']) {
      expect(fs.statSync(path.join(root, '.githooks', hook)).mode & 0o111).not.toBe(0)
    }
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
    expect(pkg.scripts.prepare).toBe('node scripts/install-hooks.mjs')
  })

  it('the contributing guide points at the one list of areas', () => {
    const guide = fs.readFileSync(path.join(root, 'CONTRIBUTING.md'), 'utf8')
    expect(guide).toContain('(scripts/commit-areas.json)')
  })
})
