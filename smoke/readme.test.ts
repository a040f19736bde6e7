/**
 * The README and docs/benchmarks.md stay short and for users, and the docs' relative links lead somewhere: the README at most
 * 10 KB, without dates, UTC times or commit hashes; every relative link of README.md and docs/** names a
 * file or folder of the repository.
 */
import fs from 'node:fs'
import path from 'node:path'
import { at } from '@tollgate/testkit/checked'

const root = path.join(__dirname, '..')

function docs(): string[] {
  const files = ['README.md']
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name)
      if (e.isDirectory()) walk(rel)
      else if (e.name.endsWith('.md')) files.push(rel)
    }
  }
  walk('docs')
  return files
}

describe('README and docs', () => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')

  it('the README is at most 10 KB', () => {
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(10 * 1024)
  })

  it('docs/benchmarks.md is at most 25 KB: the current runs only, their history in benchmarks/results/', () => {
    const doc = fs.readFileSync(path.join(root, 'docs', 'benchmarks.md'))
    expect(doc.byteLength).toBeLessThanOrEqual(25 * 1024)
  })

  it('the README carries no dates, UTC times or commit hashes', () => {
    expect(readme.match(/\b20\d\d-\d\d-\d\d\b/g)).toBeNull()
    expect(readme.match(/\b\d\d:\d\d UTC\b/g)).toBeNull()
    // seven or more hex digits with at least one letter and one digit, outside code (base64 `pk` values)
    const prose = readme.replace(/```[\s\S]*?```/g, '').replace(/`[^`]*`/g, '')
    expect(prose.match(/\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b/g)).toBeNull()
  })

  it('every relative link of README.md and docs/ names a file that exists', () => {
    const broken: string[] = []
    for (const file of docs()) {
      const text = fs.readFileSync(path.join(root, file), 'utf8').replace(/```[\s\S]*?```/g, '')
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = at(m, 1).split('#')[0]
        if (!target || /^[a-z]+:/.test(target)) continue
        if (!fs.existsSync(path.join(root, path.dirname(file), target))) broken.push(`${file}: ${m[1]}`)
      }
    }
    expect(broken).toEqual([])
  })
})
