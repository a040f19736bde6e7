/**
 * The docs' code blocks match the code. Every ```ts and ```js block of README.md, docs/**, and the
 * packages' and examples' READMEs is type-checked (strict) against the workspace sources, each block as
 * its own module; the names a fragment uses without defining them (`app`, `store`, `req`…) are declared
 * in one prelude below, typed where the type matters. Every ```sh block's repository paths must exist
 * and its `pnpm <script>` must be a root script (all READMEs say: run from the repository root), its
 * `pnpm --filter <package> …` a script of that package that pnpm really runs (`run deploy`, not
 * `deploy`). The Python key builder in docs/scripts.md is run and must build the keys `buildKey` builds.
 *
 * A block that cannot be checked says why in an HTML comment on the line before it:
 * `<!-- doc-test: skip: <reason> -->` (a peer library's code, shown for comparison).
 *
 * A complete program is marked `<!-- doc-test: run: app.mjs; GET /path 200x10; POST /login {json} 401x5 -->`:
 * it is written as `app.mjs` into a temp folder whose node_modules link the workspace packages, started
 * with `node` (tsx as the loader of the workspace's TypeScript sources) with PORT and REDIS_URL set, first
 * with no Redis listening (it must boot and answer), then against a redis-server started on that URL.
 * Each check sends requests to a limited route: that many answered with that status and RateLimit
 * headers, then a 429 with the headers and a problem+json body, which a rotated `X-Forwarded-For` does not
 * lift. A check with a JSON body is preceded by bodies that name no email (none, `{}`, a number…), which
 * must not be answered 5xx; no key in Redis may hold `undefined` or `null`.
 */
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import type { Algorithm } from '@tollgate/core'
import { buildKey, keySignature } from '@tollgate/core/scripts'
import { at, freePorts, type RedisServerHandle, startRedisServer, take } from '@tollgate/testkit'
import { CompactLayout } from '../packages/core/src/stores/redis/compact'

const root = path.join(__dirname, '..')
const out = path.join(root, '.tmp', 'doc-blocks')

interface Block {
  file: string
  line: number // 1-based line of the first code line
  lang: string
  code: string
  skip?: string
  /** A complete program to start as a server, and the requests to check it with. */
  run?: Program
}

interface Program {
  /** The file name the page tells users to paste it into (`app.mjs`). */
  name: string
  checks: Check[]
}

/** `count` requests answered `status` (with RateLimit headers), then a 429. */
interface Check {
  method: string
  path: string
  body?: string
  status: number
  count: number
}

/** Parses the text after `run:` of a marker: `app.mjs; GET /x 200x10; POST /y {"a":1} 401x5`. */
function parseRun(text: string, where: string): Program {
  const [name, ...rest] = text.split(';').map((part) => part.trim())
  const checks = rest.filter(Boolean).map((part) => {
    const m = /^([A-Z]+)\s+(\/\S*)\s+(?:(\{.*\})\s+)?(\d{3})x(\d+)$/.exec(part)
    if (!m) throw new Error(`${where}: cannot read the check '${part}' (METHOD /path [{json}] 200x10)`)
    return { method: at(m, 1), path: at(m, 2), body: m[3], status: Number(m[4]), count: Number(m[5]) }
  })
  return { name: name!, checks } // a split gives at least one part
}

/** pnpm's own commands, which `pnpm --filter <package> <command>` runs instead of a script of that name. */
const PNPM_COMMANDS =
  'add audit deploy dlx fetch i import install link list outdated pack patch prune publish rebuild remove unlink update why'.split(
    ' ',
  )

/** The scripts of the workspace package named `name` (packages/*, examples/*), or undefined. */
function workspaceScripts(name: string): string[] | undefined {
  for (const parent of ['packages', 'examples']) {
    for (const d of fs.readdirSync(path.join(root, parent))) {
      const file = path.join(root, parent, d, 'package.json')
      if (!fs.existsSync(file)) continue
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8'))
      if (pkg.name === name) return Object.keys(pkg.scripts ?? {})
    }
  }
  return undefined
}

function markdownFiles(): string[] {
  const files = ['README.md']
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name)
      if (e.isDirectory()) walk(rel)
      else if (e.name.endsWith('.md')) files.push(rel)
    }
  }
  walk('docs')
  for (const parent of ['packages', 'examples']) {
    for (const d of fs.readdirSync(path.join(root, parent))) {
      const readme = path.join(parent, d, 'README.md')
      if (fs.existsSync(path.join(root, readme))) files.push(readme)
    }
  }
  return files
}

function blocksOf(file: string): Block[] {
  const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w+)\s*$/.exec(at(lines, i))
    if (!open) continue
    const start = i + 1
    let end = start
    while (end < lines.length && !at(lines, end).startsWith('```')) end++
    const skip = /<!--\s*doc-test:\s*skip:\s*(.+?)\s*-->/.exec(lines[i - 1] ?? '')?.[1]
    const runText = /<!--\s*doc-test:\s*run:\s*(.+?)\s*-->/.exec(lines[i - 1] ?? '')?.[1]
    const run = runText === undefined ? undefined : parseRun(runText, `${file}:${i}`)
    blocks.push({
      file,
      line: start + 1,
      lang: at(open, 1),
      code: lines.slice(start, end).join('\n'),
      skip,
      run,
    })
    i = end
  }
  return blocks
}

const all = markdownFiles().flatMap(blocksOf)
const code = all.filter((b) => (b.lang === 'ts' || b.lang === 'js') && !b.skip)
const skipped = all.filter((b) => b.skip)

/**
 * What fragments use without defining. A block that defines one of these names shadows it (each block
 * is a module).
 */
const PRELUDE = `import type { Request, Response, NextFunction } from 'express'
import type { RateLimiter, RedisStore, Decision } from '@tollgate/core'
declare global {
  const app: any
  const store: RedisStore
  const redis: any
  const client: any
  const api: RateLimiter
  const login: RateLimiter
  const limiter: RateLimiter
  const decision: Decision
  const req: Request & Record<string, any>
  const res: Response
  const next: NextFunction
  const c: any
  const ip: string
  const email: string
  const password: string
  const job: any
  const handler: any
  const loginHandler: any
  const key: string
  const reply: any
  const secret: string
  const tenantId: string
  const jobs: RateLimiter
  const search: any
  const health: any
  const searchHandler: any
  const exportHandler: any
  const PLANS: Map<string, 'free' | 'pro'>
  const plans: Record<'free' | 'pro', RateLimiter>
  function ipKey(c: unknown): string
  function myHmacBase64(secret: string, key: string): string
  function checkPassword(email: string, password: string): Promise<boolean>
  function callUpstream(...args: any[]): Promise<unknown>
}
export {}
`

/** Writes every block as a module of the output folder, with the prelude, tsconfig and linked packages. */
function writeBlocks(): void {
  fs.rmSync(out, { recursive: true, force: true })
  fs.mkdirSync(out, { recursive: true })
  fs.writeFileSync(path.join(out, 'prelude.d.ts'), PRELUDE)
  fs.writeFileSync(path.join(out, 'package.json'), '{ "type": "module" }\n')
  linkModules(out, code)
  code.forEach((b) => {
    const name = fileOf(b)
    // Each block is a module of its own, so a block may redefine a prelude name; it sees the imports of
    // the blocks above it in the same document (a page imports once, then shows fragments).
    // A relative import names a file beside the document.
    const text = b.code.replace(
      /from '(\.{1,2}\/[^']+)'/g,
      (_, spec: string) => `from '${path.relative(out, path.join(root, path.dirname(b.file), spec))}'`,
    )
    fs.writeFileSync(path.join(out, name), `${inheritedImports(b)}${text}\nexport {}\n`)
  })
  fs.writeFileSync(
    path.join(out, 'tsconfig.json'),
    JSON.stringify({
      extends: '../../tsconfig.base.json',
      compilerOptions: {
        noEmit: true,
        module: 'esnext',
        moduleResolution: 'bundler',
        target: 'es2022',
        types: ['node'],
        noUnusedLocals: false,
        // fragments pass callbacks to `app`, which the prelude cannot type for three frameworks at once
        noImplicitAny: false,
        // a block may show two variants of one line, or import what the next block uses
        allowUnreachableCode: true,
        paths: basePaths(),
      },
      include: ['*.ts'],
    }),
  )
}

describe('docs code blocks', () => {
  beforeAll(writeBlocks)

  it('finds the blocks (and says which it skips, and why)', () => {
    expect(code.length).toBeGreaterThan(20)
    for (const b of skipped) expect(b.skip!.length).toBeGreaterThan(10)
    console.log(`doc blocks: ${code.length} ts/js checked, ${skipped.length} skipped`)
  })

  it('every ts/js block type-checks against the workspace sources', () => {
    const where = new Map(code.map((b) => [fileOf(b), b]))
    let report = ''
    try {
      execFileSync(
        process.execPath,
        [require.resolve('typescript/bin/tsc'), '-p', path.join(out, 'tsconfig.json')],
        {
          cwd: root,
          stdio: 'pipe',
        },
      )
    } catch (err) {
      report = String((err as { stdout?: Buffer }).stdout ?? err)
    }
    // Map each diagnostic back to the document and line it came from.
    const problems = report
      .split('\n')
      .filter((l) => l.includes('error TS'))
      .map((l) => {
        const m = /doc-blocks\/([^()]+)\((\d+),(\d+)\): (.*)$/.exec(l)
        const b = m && where.get(at(m, 1))
        return b && m
          ? `${b.file}:${b.line + Number(m[2]) - 1 - inheritedImports(b).split('\n').length + 1}: ${m[4]}`
          : l
      })
    expect(problems).toEqual([])
  }, 120_000)

  it('every block that needs no framework app runs against the test Redis without an error', async () => {
    // Written by the type-check test above; the values a fragment uses come from RUNTIME_PRELUDE.
    fs.writeFileSync(path.join(out, 'runtime-prelude.ts'), RUNTIME_PRELUDE)
    const runnable = code.filter((b) => {
      // complete programs are started as servers by the test below
      if (b.run) return false
      // workerd-only modules, servers of their own, a Redis Cluster
      if (/from '[^']*(cloudflare|@tollgate\/testkit|@upstash)|createCluster|Cluster\(/.test(b.code))
        return false
      return NOT_AT_RUN_TIME.every((n) => !new RegExp(`\\b${n}\\b`).test(b.code) || defines(b.code, n))
    })
    expect(runnable.length).toBeGreaterThan(8)
    const failures: string[] = []
    const queue = [...runnable]
    const runOne = async (b: Block) => {
      const entry = path.join(out, fileOf(b).replace(/\.ts$/, '.run.ts'))
      // The block is imported after the prelude's top-level await has finished (a static sibling import
      // would start before it).
      fs.writeFileSync(
        entry,
        `import './runtime-prelude.ts'\nawait import('./${fileOf(b)}')\nconsole.log('${DONE}')\n`,
      )
      const failure = await runBlock(entry, 60_000)
      if (failure) failures.push(`${b.file}:${b.line}: ${failure}`)
    }
    await Promise.all(
      [0, 1].map(async () => {
        for (let b = queue.shift(); b; b = queue.shift()) await runOne(b)
      }),
    )
    console.log(
      `doc blocks run: ${runnable.length} (${runnable.map((b) => `${b.file}:${b.line}`).join(', ')})`,
    )
    expect(failures).toEqual([])
  }, 300_000)

  it("each adapter page's main example is a program that boots without Redis, serves and limits", async () => {
    const programs = code.filter((b) => b.run)
    // One per adapter page, in JavaScript: users paste it into a .mjs file.
    for (const page of ['express', 'fastify', 'hono']) {
      const marked = programs.filter((b) => b.file === path.join('docs', 'adapters', `${page}.md`))
      expect(marked.map((b) => [b.lang, b.run!.name, b.run!.checks.length > 0])).toEqual([
        ['js', 'app.mjs', true],
      ])
    }
    const failures: string[] = []
    // One at a time: each starts a server and a redis-server of its own.
    for (const b of programs) {
      const failure = await runProgram(b)
      if (failure) failures.push(`${b.file}:${b.line}: ${failure}`)
    }
    console.log(`doc programs run: ${programs.map((b) => `${b.file}:${b.line}`).join(', ')}`)
    expect(failures).toEqual([])
  }, 300_000)

  it('every sh block names paths that exist and scripts that exist (root, or the --filter package)', () => {
    const scripts = Object.keys(JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).scripts)
    const problems: string[] = []
    for (const b of all.filter((x) => x.lang === 'sh' && !x.skip)) {
      b.code.split('\n').forEach((line, i) => {
        const text = line.replace(/#.*$/, '')
        for (const m of text.matchAll(
          /(?:^|\s)((?:packages|examples|benchmarks|scripts|docs|smoke)\/[\w./@-]*)/g,
        )) {
          const p = at(m, 1).replace(/[.,;:]$/, '')
          // a jest path pattern may name a prefix (`packages/core/test/cluster` for its cluster-*.test.ts)
          const dir = path.join(root, path.dirname(p))
          const exists =
            fs.existsSync(path.join(root, p)) ||
            (fs.existsSync(dir) && fs.readdirSync(dir).some((f) => f.startsWith(path.basename(p))))
          if (!exists) problems.push(`${b.file}:${b.line + i}: no ${p}`)
        }
        for (const m of text.matchAll(/pnpm(?:@[\d.]+)?\s+(?:run\s+)?([\w:-]+)/g)) {
          const s = at(m, 1)
          const builtins = [
            'install',
            'add',
            'exec',
            'dlx',
            'test',
            'run',
            'i',
            'pack',
            '-r',
            '--filter',
            'publish',
          ]
          if (!builtins.includes(s) && !scripts.includes(s))
            problems.push(`${b.file}:${b.line + i}: no script ${s}`)
        }
        // `pnpm --filter <package> <name>` runs the package's script only when <name> is no pnpm command
        // of its own (`deploy`, `publish`, `pack`… are): such a script needs `run <name>`.
        for (const m of text.matchAll(/pnpm(?:@[\d.]+)?\s+--filter[= ](\S+)\s+(run\s+)?([\w:-]+)/g)) {
          // the first and third groups always match; `run` is the optional one
          const name = m[1]!
          const run = m[2]
          const s = m[3]!
          const own = workspaceScripts(name)
          if (own === undefined) problems.push(`${b.file}:${b.line + i}: no workspace package ${name}`)
          else if (run && !own.includes(s))
            problems.push(`${b.file}:${b.line + i}: ${name} has no script ${s}`)
          else if (!run && PNPM_COMMANDS.includes(s))
            problems.push(
              `${b.file}:${b.line + i}: pnpm runs its own \`${s}\` here, not the script: use \`run ${s}\``,
            )
          else if (!run && !['exec', 'test'].includes(s) && !own.includes(s))
            problems.push(`${b.file}:${b.line + i}: ${name} has no script ${s}`)
        }
      })
    }
    expect(problems).toEqual([])
  })

  it("docs/scripts.md's Python key builder builds the keys buildKey builds", () => {
    const block = all.find((b) => b.file === path.join('docs', 'scripts.md') && b.lang === 'python')
    expect(block).toBeDefined()
    const identities = [
      'user:42',
      'a}{b',
      '~h:forged',
      'x'.repeat(129),
      'ünïcødé',
      `é${'x'.repeat(127)}`,
      'tab\there',
    ]
    const windows: [Algorithm, number][] = [
      ['sliding-window', 60_000],
      ['fixed-window', 900_000],
      ['gcra', 1500],
      ['token-bucket', 86_400_000],
      ['sliding-log', 7_200_000],
      ['concurrency', 30_000],
    ]
    const program = `${block!.code}
import json, sys
for identity in json.loads(sys.argv[1]):
    for alg, window in json.loads(sys.argv[2]):
        print(key('p', identity, signature(alg, window)))
        print(key('p', identity, signature(alg, window), 'ip'))
`
    const keys = execFileSync(
      '/usr/bin/python3',
      ['-c', program, JSON.stringify(identities), JSON.stringify(windows)],
      { encoding: 'utf8' },
    )
    expect(keys.trim().split('\n')).toEqual(
      identities.flatMap((id) =>
        windows.flatMap(([alg, ms]) => {
          const sig = keySignature(alg, ms)
          return [buildKey('p', id, sig), buildKey('p', id, sig, 'ip')]
        }),
      ),
    )
  })
  it("docs/scripts.md's Python compact placement puts pairs where RedisStore's compact storage does", () => {
    const blocks = all.filter((b) => b.file === path.join('docs', 'scripts.md') && b.lang === 'python')
    expect(blocks).toHaveLength(2)
    const secret = 'a-secret-of-the-docs'
    const layout = new CompactLayout(secret)
    const keys = ['user:42', 'a}{b', 'ünïcødé', '203.0.113.7', `é${'x'.repeat(127)}`].flatMap((id) => [
      buildKey('p', id, keySignature('sliding-window', 60_000)),
      buildKey('login', id, keySignature('fixed-window', 900_000), 'ip'),
    ])
    const program = `${at(blocks, 0).code}\n${at(blocks, 1).code}
import json, sys
for k in json.loads(sys.argv[1]):
    levels, field = compact(k, sys.argv[2])
    print(levels[0] + '!' + field)
`
    const out = execFileSync('/usr/bin/python3', ['-c', program, JSON.stringify(keys), secret], {
      encoding: 'utf8',
    })
    const policy = { name: 'p', algorithm: 'fixed-window', limit: 1, windowMs: 1, burst: 1 } as const
    expect(out.trim().split('\n')).toEqual(keys.map((key) => at(layout.map([{ policy, key }]), 0).key))
  })
})

/** Bodies that name no usable email: a login key must not answer them 5xx or key them on `undefined`. */
const EMAILLESS_BODIES = [
  undefined,
  '{}',
  'null',
  '[]',
  '{"email":42}',
  '{"email":null}',
  '{"email":"  "}',
  '{',
]

/**
 * Starts a marked program as a user would (in a folder of its own, `node` with PORT and REDIS_URL) and
 * checks it: it boots and answers with no Redis listening, limits once a redis-server comes up on that
 * URL, and each check's route answers `count` times, then 429. Returns what went wrong, or undefined.
 */
async function runProgram(b: Block): Promise<string | undefined> {
  const program = b.run!
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-doc-'))
  let server: RedisServerHandle | undefined
  let output = ''
  let exited: Promise<unknown> = Promise.resolve()
  let child: ReturnType<typeof spawn> | undefined
  try {
    fs.writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n')
    fs.writeFileSync(path.join(dir, program.name), `${b.code}\n`)
    linkModules(dir, [b], ['tsx'])
    const [port, redisPort] = take(await freePorts(2), 2)
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: String(port),
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    }
    delete env.TSX_TSCONFIG_PATH
    // tsx loads the workspace packages' TypeScript sources; the program itself is plain JavaScript
    child = spawn(process.execPath, ['--import', 'tsx', program.name], {
      cwd: dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const running = child
    exited = new Promise((resolve) => running.once('exit', resolve))
    running.stdout?.on('data', (d) => (output += d))
    running.stderr?.on('data', (d) => (output += d))
    const base = `http://127.0.0.1:${port}`
    await untilListening(port, running)

    // No Redis yet: the app answers (the failure policy, 'allow' by default: no RateLimit headers).
    const [first] = take(program.checks, 1)
    const down = await send(base, first)
    if (down.status !== first.status || down.headers.has('ratelimit'))
      throw new Error(
        `with Redis down, ${first.method} ${first.path} answered ${down.status} ${headersOf(down)}`,
      )

    server = await startRedisServer({ port: redisPort })
    // The client reconnects by itself; until then requests pass uncharged. Bounded, not timed.
    let spent = 0
    for (const deadline = Date.now() + 30_000; spent === 0; ) {
      const r = await send(base, first)
      if (r.headers.has('ratelimit')) spent = 1
      else if (Date.now() > deadline) throw new Error('never limited once Redis was up (no RateLimit header)')
      else await new Promise((resolve) => setTimeout(resolve, 100))
    }

    for (const [i, check] of program.checks.entries()) {
      const route = `${check.method} ${check.path}`
      if (check.body !== undefined) {
        for (const body of EMAILLESS_BODIES) {
          const r = await send(base, { ...check, body })
          if (r.status >= 500)
            throw new Error(`${route} with body ${body ?? '(none)'}: ${r.status} ${headersOf(r)}`)
        }
      }
      for (let n = i === 0 ? spent : 0; n < check.count; n++) {
        const r = await send(base, check)
        if (r.status !== check.status || !r.headers.has('ratelimit'))
          throw new Error(`${route} #${n + 1} of ${check.count}: ${r.status} ${headersOf(r)}`)
      }
      const refused = await send(base, check)
      const body = await refused.json().catch(() => undefined)
      const problems = [
        refused.status === 429 || `status ${refused.status}`,
        /"[^"]+";r=0;t=\d+/.test(refused.headers.get('ratelimit') ?? '') || 'RateLimit',
        refused.headers.has('ratelimit-policy') || 'RateLimit-Policy',
        Number(refused.headers.get('retry-after')) >= 1 || 'Retry-After',
        /^application\/problem\+json/.test(refused.headers.get('content-type') ?? '') || 'content-type',
        (body?.status === 429 && /#quota-exceeded$/.test(body?.type)) || `body ${JSON.stringify(body)}`,
      ].filter((p) => p !== true)
      if (problems.length)
        throw new Error(`${route} #${check.count + 1} is no 429 as documented: ${problems.join(', ')}`)
      // A forwarded address must not be a fresh budget: no proxy is trusted in a main example.
      for (let k = 1; k <= 3; k++) {
        const r = await send(base, check, {
          'x-forwarded-for': `203.0.113.${k}`,
          'x-real-ip': `203.0.113.${k}`,
        })
        if (r.status !== 429)
          throw new Error(`${route} with X-Forwarded-For 203.0.113.${k} after the 429: ${r.status}`)
      }
    }
    const keys = (await server.command('KEYS', '*')).split('\n').filter(Boolean)
    const bad = keys.filter((k) => /undefined|null|email:[}:]/.test(k))
    if (keys.length === 0 || bad.length) throw new Error(`keys in Redis: ${keys.join(' ')}`)
    return undefined
  } catch (err) {
    return `${(err as Error).message}\n--- output (tail) ---\n${output.slice(-1500)}`
  } finally {
    child?.kill('SIGTERM')
    await exited
    await server?.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** One request of a check, its body (if any) as JSON; the response body is read (kept for `json()`). */
async function send(base: string, check: Check, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(base + check.path, {
    method: check.method,
    headers: check.body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: check.body,
  })
  const text = await res.text()
  return new Response(res.status === 204 ? null : text, { status: res.status, headers: res.headers })
}

function headersOf(r: Response): string {
  return JSON.stringify(Object.fromEntries(r.headers))
}

/** Resolves once `port` accepts connections; rejects if the program exits first or after 30 s. */
async function untilListening(port: number, child: ReturnType<typeof spawn>): Promise<void> {
  for (const deadline = Date.now() + 30_000; ; ) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before listening`)
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1')
      socket.once('connect', () => resolve(true))
      socket.once('error', () => resolve(false))
      socket.once('close', () => socket.destroy())
    })
    if (open) return
    if (Date.now() > deadline) throw new Error(`not listening on ${port} within 30 s`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** Prelude names a block cannot get at run time (a framework's app, request or reply objects). */
const NOT_AT_RUN_TIME = ['app', 'req', 'res', 'next', 'c', 'reply', 'job', 'PLANS', 'plans', 'ipKey']

/** The values the runnable fragments use, on the test Redis. */
const RUNTIME_PRELUDE = `import { createClient } from 'redis'
import { RateLimiter, RedisStore } from '@tollgate/core'
const g = globalThis as any
Object.assign(g, {
  ip: '203.0.113.9',
  email: 'someone@example.com',
  password: 'wrong',
  checkPassword: async () => false,
  key: 'user:42',
  tenantId: 'tenant-1',
  secret: 'server-secret',
  myHmacBase64: (s: string, k: string) => btoa(s + k),
  callUpstream: async () => {},
  // route handlers, for any of the three frameworks
  handler: async () => 'ok',
  loginHandler: async () => 'ok',
  search: async () => 'ok',
  health: async () => 'ok',
  searchHandler: async () => 'ok',
  exportHandler: async () => 'ok',
})
const redis = await createClient({ url: process.env.REDIS_URL }).on('error', () => {}).connect()
const store = new RedisStore(redis)
const prefix = 'doc' + process.pid
Object.assign(g, {
  redis,
  client: redis,
  store,
  api: new RateLimiter({ store, prefix: prefix + 'api', limit: 100, window: '1m' }),
  login: new RateLimiter({ store, prefix: prefix + 'login', policies: { ip: { limit: 100, window: '15m' }, account: { limit: 10, window: '15m' } } }),
  limiter: new RateLimiter({ store, prefix: prefix + 'lim', limit: 10, window: '1m' }),
  jobs: new RateLimiter({ store, prefix: prefix + 'jobs', limit: 10, window: '1s' }),
})
g.decision = await g.api.consume('doc')
`

/** Whether a block defines `name` itself (declaration or import). */
function defines(text: string, name: string): boolean {
  return new RegExp(
    // a parameter: in the list of an arrow function or a function, not an argument of a call
    `\\b(?:const|let|var|function|class)\\s+${name}\\b|import[^\\n]*\\b${name}\\b[^\\n]*from|\\([^()]*\\b${name}\\b[^()]*\\)\\s*(?::[^=]+)?=>|function\\s*\\w*\\s*\\([^)]*\\b${name}\\b`,
  ).test(text)
}

/** The module file of a block in the output folder. */
function fileOf(b: Block): string {
  return `${b.file.replace(/[^A-Za-z0-9]+/g, '_')}_${b.line}.ts`
}

/** What a run entry prints once its block has been evaluated to the end without throwing. */
const DONE = 'doc-block-evaluated'

/**
 * Runs a block's entry with tsx (the output folder's tsconfig maps @tollgate/* to the sources). The block
 * passes once its module has been evaluated to the end (the entry prints DONE) and nothing failed in the
 * next 300 ms; a block that starts a server or holds a connection is then stopped. It fails if it exits
 * non-zero, or has not finished evaluating within `budgetMs` (no answer is no pass).
 */
function runBlock(entry: string, budgetMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry], {
      cwd: out,
      // TOLLGATE_SECRET: what a deployment sets for storage: 'compact' (docs/storage.md)
      env: {
        ...process.env,
        TSX_TSCONFIG_PATH: path.join(out, 'tsconfig.json'),
        PORT: '0',
        TOLLGATE_SECRET: 'doc-blocks-secret-0123',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    let evaluated = false
    let verdict: string | undefined | null = null
    const finish = (v: string | undefined) => {
      if (verdict !== null) return
      verdict = v
      clearTimeout(timer)
      child.kill('SIGKILL')
      resolve(v)
    }
    child.stderr.on('data', (d) => {
      stderr += d
    })
    child.stdout.on('data', (d) => {
      if (!evaluated && String(d).includes(DONE)) {
        evaluated = true
        setTimeout(() => finish(undefined), 300)
      }
    })
    const timer = setTimeout(
      () => finish(`not evaluated within ${budgetMs} ms\n${stderr.slice(-800)}`),
      budgetMs,
    )
    child.on('exit', (code) => {
      if (code === 0 && evaluated) finish(undefined)
      else if (code !== null)
        finish(`exit ${code}${evaluated ? '' : ' before the end of the block'}\n${stderr.slice(-800)}`)
    })
  })
}

const IMPORT = /^import\s+(?:type\s+)?(.+?)\s+from\s+'[^']+'.*$/

/** The names one import line binds. */
function importedNames(clause: string): string[] {
  return clause
    .replace(/[{}]/g, ',')
    .split(',')
    .map((part) =>
      part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)
        .pop()!
        .replace(/^\*\s*/, '')
        .trim(),
    )
    .filter(Boolean)
}

/** The single-line imports of the blocks above `block` in its document whose names it does not bind itself. */
function inheritedImports(block: Block): string {
  const mine = new Set<string>()
  for (const line of block.code.split('\n')) {
    const m = IMPORT.exec(line)
    if (m) for (const n of importedNames(at(m, 1))) mine.add(n)
    for (const d of line.matchAll(/\b(?:const|let|function|class)\s+([A-Za-z_$][\w$]*)/g)) mine.add(at(d, 1))
  }
  const lines: string[] = []
  for (const other of code) {
    if (other.file !== block.file || other.line >= block.line) continue
    for (const line of other.code.split('\n')) {
      const m = IMPORT.exec(line)
      if (!m) continue
      const names = importedNames(at(m, 1))
      if (names.every((n) => !mine.has(n))) {
        lines.push(line.replace(/\s*\/\/.*$/, ''))
        for (const n of names) mine.add(n)
      }
    }
  }
  return lines.length ? `${lines.join('\n')}\n` : ''
}

/** The workspace's own path mappings (tsconfig.base.json), relative to this folder. */
function basePaths(): Record<string, string[]> {
  const base = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.base.json'), 'utf8'))
  const paths: Record<string, string[]> = {}
  for (const [spec, targets] of Object.entries<string[]>(base.compilerOptions.paths ?? {})) {
    paths[spec] = targets.map((t) => path.relative(out, path.join(root, t)))
  }
  return paths
}

/**
 * Links the modules `blocks` import into `into`/node_modules, so they resolve as in an app (package
 * exports included): @tollgate/* to the workspace package, a third-party module (and its @types package)
 * to the first copy found in the node_modules of whichever workspace package depends on it; `extra` too.
 */
function linkModules(into: string, blocks: Block[], extra: string[] = []): void {
  const dirs = [root, ...['packages', 'examples', 'benchmarks'].flatMap((p) => listDirs(path.join(root, p)))]
  dirs.push(path.join(root, 'benchmarks'))
  const pkgs = new Set<string>(extra)
  for (const b of blocks) {
    for (const m of b.code.matchAll(/from '([^'.][^']*)'/g)) {
      if (at(m, 1).startsWith('node:')) continue
      const pkg = at(m, 1).startsWith('@')
        ? at(m, 1).split('/').slice(0, 2).join('/')
        : at(at(m, 1).split('/'), 0)
      pkgs.add(pkg)
      if (!pkg.startsWith('@tollgate/')) pkgs.add(`@types/${pkg.replace(/^@([^/]+)\//, '$1__')}`)
    }
  }
  for (const pkg of pkgs) {
    const found = pkg.startsWith('@tollgate/')
      ? path.join(root, 'packages', pkg.slice('@tollgate/'.length))
      : dirs.map((d) => path.join(d, 'node_modules', pkg)).find((d) => fs.existsSync(d))
    if (!found || !fs.existsSync(found)) continue
    const link = path.join(into, 'node_modules', pkg)
    fs.mkdirSync(path.dirname(link), { recursive: true })
    fs.symlinkSync(fs.realpathSync(found), link, 'dir')
  }
}

function listDirs(dir: string): string[] {
  return fs.existsSync(dir)
    ? fs
        .readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => path.join(dir, e.name))
    : []
}
