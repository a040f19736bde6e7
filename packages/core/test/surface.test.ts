/**
 * The public surface is what the package README lists, name for name: the main entry (`@tollgate/core`)
 * and each subpath, and `@tollgate/http` (the HTTP layer built on core) against its own README. A name added to an entry without a line in the README (or the other way round) fails
 * here, so the surface cannot grow unnoticed. Entries re-export by explicit name lists only (no
 * `export *`, no local declarations), which is what lets this test read them.
 */
import fs from 'node:fs'
import path from 'node:path'
import * as http from '@tollgate/http'
import { at } from '@tollgate/testkit/checked'
import * as main from '../src'
import * as internal from '../src/entries/internal'
import * as observability from '../src/entries/observability'
import * as scripts from '../src/entries/scripts'

const pkg = path.resolve(__dirname, '..')
const httpPkg = path.resolve(pkg, '../http')
const readme = fs.readFileSync(path.join(pkg, 'README.md'), 'utf8')
const IDENTIFIER = /`([A-Za-z_$][\w$]*)`/g

/** The markdown of `text` between a `## ` heading starting with `title` and the next `## ` heading. */
function section(title: string, text = readme): string {
  const start = text.indexOf(`\n## ${title}`)
  if (start < 0) throw new Error(`README.md has no "## ${title}" section`)
  const end = text.indexOf('\n## ', start + 1)
  return text.slice(start, end < 0 ? undefined : end)
}

/** Body rows of the markdown table(s) in `text`, split into trimmed cells. */
function rows(text: string): string[][] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|[\s|:-]+\|$/.test(line))
    .slice(1)
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    )
}

const names = (cell: string) => [...cell.matchAll(IDENTIFIER)].map((m) => m[1])

/** Every name an entry file exports, types included, read from its `export { … } from` lists. */
function exported(file: string, dir = pkg): { all: string[]; values: string[] } {
  const source = fs.readFileSync(path.join(dir, 'src', file), 'utf8')
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '')
  const all: string[] = []
  const values: string[] = []
  const statement = /export\s+(type\s+)?\{([^}]*)\}\s*from\s*'[^']+'/g
  for (const [, typeOnly, list] of code.matchAll(statement)) {
    for (const raw of list! // the second group is not optional
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const isType = Boolean(typeOnly) || raw.startsWith('type ')
      const name = raw
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)
        .pop()!
      all.push(name)
      if (!isType) values.push(name)
    }
  }
  // Nothing else may export: no `export *`, no declarations (an entry only re-exports, by name).
  expect(code.replace(statement, '')).not.toMatch(/\bexport\b/)
  return { all: all.sort(), values: values.sort() }
}

const runtime = (mod: object) =>
  Object.keys(mod)
    .filter((k) => k !== '__esModule' && k !== 'default')
    .sort()

describe('the public surface is the README list', () => {
  it('@tollgate/core: exactly the names of the README table, at most 30', () => {
    const documented = rows(section('What an application uses')).flatMap((cells) => names(at(cells, 1)))
    const { all, values } = exported('index.ts')
    expect(all).toEqual([...new Set(documented)].sort())
    expect(documented).toHaveLength(new Set(documented).size) // each name listed once
    expect(all.length).toBeLessThanOrEqual(30)
    // The source reading is right: the module's runtime exports are its value names.
    expect(runtime(main)).toEqual(values)
  })

  const subpaths: [string, string, object][] = [
    ['internal', 'entries/internal.ts', internal],
    ['observability', 'entries/observability.ts', observability],
    ['scripts', 'entries/scripts.ts', scripts],
  ]
  it.each(subpaths)('@tollgate/core/%s: exactly the names of its README row', (subpath, file, mod) => {
    const row = rows(section('Building blocks')).find((cells) => cells[0] === `\`@tollgate/core/${subpath}\``)
    if (!row) throw new Error(`README.md lists no @tollgate/core/${subpath}`)
    const documented = new Set(names(at(row, 2)))
    const { all, values } = exported(file)
    expect(all).toEqual([...documented].sort())
    expect(runtime(mod)).toEqual(values)
  })

  it('package.json exports the main entry and exactly these subpaths, in the dev and the published form', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8'))
    const entries = ['.', './internal', './observability', './scripts', './package.json']
    expect(Object.keys(manifest.exports)).toEqual(entries)
    expect(Object.keys(manifest.publishConfig.exports)).toEqual(entries)
    for (const [subpath, target] of Object.entries(manifest.exports)) {
      if (subpath === './package.json') continue
      // dev form: the source by default; the benchmarks' `tollgate-dist` condition names the built file the
      // published form imports, so that they measure what users run (docs/benchmarks.md)
      const { default: source, 'tollgate-dist': built } = target as {
        default: string
        'tollgate-dist': string
      }
      expect(fs.existsSync(path.join(pkg, source))).toBe(true)
      expect(built).toBe(manifest.publishConfig.exports[subpath].import.default)
    }
  })

  it('@tollgate/http: exactly the names of its README table, each documented where it is declared', () => {
    const text = fs.readFileSync(path.join(httpPkg, 'README.md'), 'utf8')
    const documented = rows(section('Exports', text)).flatMap((cells) => names(at(cells, 1)))
    const { all, values } = exported('index.ts', httpPkg)
    expect(all).toEqual([...new Set(documented)].sort())
    expect(documented).toHaveLength(new Set(documented).size)
    expect(runtime(http)).toEqual(values)
    // `check` and its types are core's, re-exported: documented there.
    const sources = fs
      .readdirSync(path.join(httpPkg, 'src'))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && f !== 'index.ts')
      .map((f) => fs.readFileSync(path.join(httpPkg, 'src', f), 'utf8'))
      .join('\n')
    const undocumented = all.filter((name) => {
      if (['check', 'OptionCheck', 'OptionSchema'].includes(name)) return false
      const declaration = new RegExp(
        `\\*/\\n(export (declare )?(abstract )?(async )?(function|const|type|interface|class) ${name}\\b)`,
      )
      return !declaration.test(sources)
    })
    expect(undocumented).toEqual([])
  })
})
