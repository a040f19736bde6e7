#!/usr/bin/env node
// Generates, from the sources in packages/core/lua/entries/, algorithms/ and includes/:
// - packages/core/src/scripts/generated.ts, so no file is read at run time (bundlers, edge runtimes) and
//   each script's SHA1 is known before the first call;
// - packages/core/lua/<entry>.lua, the complete scripts that the package publishes for workers in other
//   languages: byte for byte what Tollgate sends, so the file's SHA1 is the one in generated.ts and both
//   share Redis' script cache. They are build output (not committed): written by `pnpm gen:lua`, by the
//   core package's `prepack`, and by the tests that load them.
// The sources: entry scripts (ENTRIES, lua/entries/), one file per algorithm (ALGORITHMS,
// lua/algorithms/), and shared pieces (lua/includes/).
// - `-- @include algorithms` in an entry is where the algorithms it carries go, each helper they use
//   (an algorithm's own `-- @include <helper>` lines) once before them.
// - `-- @include <name>` elsewhere in an entry splices lua/includes/<name>.lua in place.
// `--check` exits 1 if the committed generated.ts is stale; `--published` writes only the lua/ files.
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const publishedDir = join(root, 'packages/core/lua')
const ENTRIES_DIR = join(publishedDir, 'entries')
const ALGORITHMS_DIR = join(publishedDir, 'algorithms')
const INCLUDES_DIR = join(publishedDir, 'includes')
const out = join(root, 'packages/core/src/scripts/generated.ts')
const ALGORITHMS = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'gcra',
  'concurrency',
  'compact-fixed-window',
  'compact-sliding-window',
  'calendar',
]
const ENTRIES = ['consume', 'peek', 'refund', 'reset', 'batch', 'fingerprint', 'secret', 'top', 'control']
const PER_ALGORITHM = ['consume', 'peek', 'refund', 'batch']

// The lists above fix the order (an algorithm's place is its code): a file in entries/ or algorithms/
// that they do not name would silently be left out of every script, so it is refused.
for (const [dir, names] of [
  [ENTRIES_DIR, ENTRIES],
  [ALGORITHMS_DIR, ALGORITHMS],
]) {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.lua'))
    .map((f) => f.slice(0, -4))
  const unlisted = files.filter((f) => !names.includes(f))
  if (unlisted.length) throw new Error(`${dir}: not listed in scripts/gen-lua.mjs: ${unlisted.join(', ')}`)
}

/**
 * The Lua as sent: without comments (the sources in lua/ keep them). Much of every script's text is
 * its documentation, which Redis parses on every EVAL and every edge bundle carries. No script has `--` or
 * `[[` inside a string literal (checked below), so comments can be dropped by pattern. The shebang and
 * the `-- @include` markers stay.
 */
function lean(lua) {
  return lua
    .replace(/--\[\[[\s\S]*?\]\]/g, '')
    .replace(/^[ \t]*--(?!\[\[| @include).*\n/gm, '')
    .replace(/[ \t]+--(?! @include)[^\n]*$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
}
const MAX_LINES = 300
const read = (dir, name) => {
  const file = join(dir, `${name}.lua`)
  const text = readFileSync(file, 'utf8')
  // a source past this has grown more than one concept: split it into includes/
  const lines = text.split('\n')
  if (lines.length - (text.endsWith('\n') ? 1 : 0) > MAX_LINES)
    throw new Error(`${file}: over ${MAX_LINES} lines`)
  for (const line of lines) {
    const code = line.replace(/--.*$/, '')
    if (/(['"])[^'"]*(--|\[\[)[^'"]*\1/.test(line) && !/^\s*--/.test(line) && code.includes(line.trim()))
      throw new Error(`${file}: a string literal holds '--' or '[[': comment stripping would break it`)
  }
  return text
}

const INCLUDE = /^-- @include ([\w-]+)\n?/gm
const MARKER = '-- @include algorithms'

/** A piece's lean text with its own `@include` lines taken out, and the names they gave. */
function piece(dir, name) {
  const includes = []
  const text = lean(read(dir, name)).replace(INCLUDE, (_, include) => {
    includes.push(include)
    return ''
  })
  return { text: text.trim(), includes }
}
/** A shared piece's text: pieces are spliced one level deep, so one that includes another is refused. */
function leaf(name) {
  const { text, includes } = piece(INCLUDES_DIR, name)
  if (includes.length) throw new Error(`${name}.lua: a shared piece cannot @include (${includes.join(', ')})`)
  return text
}

const algorithms = Object.fromEntries(ALGORITHMS.map((name) => [name, piece(ALGORITHMS_DIR, name)]))
/** The helpers the algorithms share, each once, in the order the algorithms first name them. */
const HELPERS = [...new Set(ALGORITHMS.flatMap((name) => algorithms[name].includes))]
const helpers = Object.fromEntries(HELPERS.map((name) => [name, leaf(name)]))

/** What goes at the marker for a set of algorithms: the helpers they use, once each, then the algorithms. */
const carried = (names) => [...new Set(names.flatMap((name) => algorithms[name].includes)), ...names]
const textOf = (name) => helpers[name] ?? algorithms[name].text
const ALL = carried(ALGORITHMS).map(textOf).join('\n\n')

const constName = (name) => name.toUpperCase().replace(/-/g, '_')

/** An entry script with `algorithms` spliced in at the marker: the text EVAL sends. */
function assemble(entry, algorithmsText) {
  // a replacer function: a replacement string would read the Lua's `$'` as a pattern
  const raw = lean(read(ENTRIES_DIR, entry)).replace(INCLUDE, (line, name) =>
    name === 'algorithms' ? line : `${leaf(name)}\n`,
  )
  const at = raw.indexOf(MARKER)
  return {
    raw,
    at,
    source: at === -1 ? raw : raw.slice(0, at) + algorithmsText + raw.slice(at + MARKER.length),
  }
}

/** The module constants holding an entry's text before and after the marker (each spelled once). */
const partConst = (entry, part) => `${constName(entry)}_${part}`

function entryParts(entry) {
  const { raw, at } = assemble(entry, '')
  return at === -1
    ? []
    : [
        `const ${partConst(entry, 'HEAD')} = ${JSON.stringify(raw.slice(0, at))}`,
        `const ${partConst(entry, 'TAIL')} = ${JSON.stringify(raw.slice(at + MARKER.length))}`,
      ]
}

/**
 * One script: its source is the entry file with the algorithms spliced in at the marker. The module
 * spells it as `splice(ENTRY_HEAD, ALGORITHMS_CONST, ENTRY_TAIL)`, so each algorithm's Lua and each
 * entry's text are in the bundle once, not once per script that carries them; the SHA1 is of the joined
 * text, which is what EVAL sends.
 */
function script(entry, algorithmsText, algorithmsConst, name) {
  const { raw, at, source } = assemble(entry, algorithmsText)
  const spelled =
    at === -1
      ? JSON.stringify(raw)
      : `splice(${partConst(entry, 'HEAD')}, ${algorithmsConst}, ${partConst(entry, 'TAIL')})`
  const sha1 = createHash('sha1').update(source).digest('hex')
  return [
    `export const ${name}: Script = {`,
    `  name: '${name.toLowerCase()}',`,
    `  sha1: '${sha1}',`,
    `  source: ${spelled},`,
    '}',
    '',
  ]
}

/** The constant that holds what one algorithm's scripts carry: the algorithm, or it joined with its helpers. */
const onlyConst = (alg) =>
  algorithms[alg].includes.length ? `LUA_ONLY_${constName(alg)}` : `LUA_${constName(alg)}`
/** Joined at load time, through calls a minifier does not fold back into one literal per script. */
const joined = (names) => `[${names.map((name) => `LUA_${constName(name)}`).join(', ')}].join('\\n\\n')`

export function generate() {
  const lines = [
    '// GENERATED by scripts/gen-lua.mjs from packages/core/lua/{entries,algorithms,includes}/: edit those files, then `pnpm gen:lua`.',
    '/* biome-ignore-all format: generated */',
    '',
    '/** A Lua script with its SHA1, as EVALSHA needs it. */',
    'export interface Script {',
    '  readonly name: string',
    '  readonly source: string',
    '  readonly sha1: string',
    '}',
    '',
    '',
    '// Each algorithm, and each helper the algorithms share, once; the scripts below splice them in.',
    ...HELPERS.map((name) => `const LUA_${constName(name)} = ${JSON.stringify(helpers[name])}`),
    ...ALGORITHMS.map((alg) => `const LUA_${constName(alg)} = ${JSON.stringify(algorithms[alg].text)}`),
    // Joined and spliced at load time, through calls a minifier does not fold back into literals
    // (esbuild folds `'a' + CONST + 'b'`, which would put each algorithm's Lua in the bundle once per script).
    `const LUA_ALL = ${joined(carried(ALGORITHMS))}`,
    ...ALGORITHMS.filter((alg) => algorithms[alg].includes.length).map(
      (alg) => `const ${onlyConst(alg)} = ${joined(carried([alg]))}`,
    ),
    'function splice(head: string, algorithms: string, tail: string): string {',
    '  return head + algorithms + tail',
    '}',
    '',
    '// Each entry script once, split at its `@include algorithms` marker.',
    ...ENTRIES.flatMap(entryParts),
    '',
    '// The general scripts carry every algorithm, for calls that mix algorithms.',
  ]
  for (const entry of ENTRIES) lines.push(...script(entry, ALL, 'LUA_ALL', constName(entry)))
  lines.push(
    '// The same scripts carrying one algorithm each: less Lua to run per call when every policy of a call',
    '// shares an algorithm (the common case). Same KEYS/ARGV/reply contract.',
  )
  for (const alg of ALGORITHMS) {
    for (const entry of PER_ALGORITHM) {
      lines.push(
        ...script(
          entry,
          carried([alg]).map(textOf).join('\n\n'),
          onlyConst(alg),
          `${constName(entry)}_${constName(alg)}`,
        ),
      )
    }
  }
  lines.push(
    '/** Scripts by algorithm code (1 fixed-window ... 6 concurrency, 7 and 8 the compact windows, as in ARGV). */',
    'export const BY_ALGORITHM: readonly (',
    '  | undefined',
    '  | { consume: Script; peek: Script; refund: Script; batch: Script }',
    ')[] = [',
    '  undefined,',
    ...ALGORITHMS.map(
      (alg) => `  { ${PER_ALGORITHM.map((e) => `${e}: ${constName(e)}_${constName(alg)}`).join(', ')} },`,
    ),
    ']',
    '',
  )
  return lines.join('\n')
}

/** The published complete scripts: file path → text. */
export function published() {
  return Object.fromEntries(
    ENTRIES.map((entry) => [join(publishedDir, `${entry}.lua`), assemble(entry, ALL).source]),
  )
}

if (process.argv.includes('--check')) {
  if (readFileSync(out, 'utf8') !== generate()) {
    console.error(`stale: ${out}: run \`pnpm gen:lua\``)
    process.exit(1)
  }
} else {
  const files = process.argv.includes('--published') ? published() : { [out]: generate(), ...published() }
  for (const [file, text] of Object.entries(files)) {
    writeFileSync(file, text)
    if (!process.argv.includes('--quiet')) console.log(`wrote ${file}`)
  }
}
