/**
 * The packages as npm users get them: every package is packed (`pnpm pack`, which builds it through its
 * `prepack`, applies `publishConfig` and turns `workspace:` ranges into versions), the tarballs are installed with npm into
 * fresh apps outside the workspace, and each app serves one limited request per framework (a 200, then a
 * 429 with the IETF headers) from the test's redis-server, imports every subpath of `@tollgate/core`
 * (`/http`, `/observability`, `/scripts`), counts the refusals with `@tollgate/prometheus` and runs
 * `@tollgate/opentelemetry`; the `tollgate` bin of `@tollgate/cli` then reads the state an app left:
 *
 *   app.mjs          ESM JavaScript
 *   app.cjs          CommonJS JavaScript (`require`)
 *   node16/app.mts   TypeScript, `module: node16`, type-checked by tsc then run
 *   bundler/app.ts   TypeScript, `moduleResolution: bundler`, type-checked by tsc then run (as emitted ESM)
 *
 * `publint --strict` and `attw` (are the types wrong) check every tarball, and its package.json carries the
 * metadata npm and other tools show (repository with its directory, homepage, bugs, keywords, license,
 * engines, files). The third-party packages come
 * from the npm registry (the one network this project's machines reach); npm's cache makes reruns quick.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  PUBLIC_PACKAGES as PACKAGES,
  type PublicPackage,
  packPublicPackages,
  redisUrl,
  sh,
} from '@tollgate/testkit'

const root = path.resolve(__dirname, '..')
// The versions the workspace tests against (TOOLCHAIN.md).
const THIRD_PARTY = {
  express: '5.3.0',
  fastify: '5.12.8',
  hono: '4.13.19',
  '@hono/node-server': '2.1.8',
  redis: '6.3.1',
  'prom-client': '15.1.3',
  '@opentelemetry/api': '1.9.1',
}
const TYPES = { '@types/express': '5.0.6', '@types/node': '20.19.43' }
const tsc = path.join(root, 'node_modules/typescript/bin/tsc')
const bin = (name: string) => path.join(root, 'node_modules/.bin', name)

/** The app, in a syntax ESM JavaScript and TypeScript share. Prints one JSON line, then exits. */
const APP_ESM = `import { CHANNEL_NAMES, ConfigError, RateLimiter, RedisStore } from '@tollgate/core'
import { canonicalIp, createHttpLimiter, rateLimitHeaders } from '@tollgate/core/http'
import { eachPolicyOutcome } from '@tollgate/core/observability'
import { buildKey, CONSUME, keySignature } from '@tollgate/core/scripts'
import { rateLimit } from '@tollgate/express'
import tollgate from '@tollgate/fastify'
import { rateLimiter } from '@tollgate/hono'
import { instrumentTollgate } from '@tollgate/opentelemetry'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { Registry } from 'prom-client'
import { createClient } from 'redis'

const registry = new Registry()
const metrics = collectTollgateMetrics({ registry })
const otel = instrumentTollgate()
const redis = await createClient({ url: process.env.REDIS_URL }).on('error', () => {}).connect()
const limiter = (name: string) =>
  new RateLimiter({ store: new RedisStore(redis), prefix: \`\${process.env.PREFIX}-\${name}\`, limit: 1, window: '1h' })

const ex = express()
ex.get('/', rateLimit({ limiter: limiter('express') }), (_req, res) => {
  res.send('ok')
})
const exServer = ex.listen(0, '127.0.0.1')
await new Promise((resolve) => exServer.once('listening', resolve))

const fa = Fastify()
await fa.register(tollgate, { limiter: limiter('fastify') })
fa.get('/', async () => 'ok')
await fa.listen({ port: 0, host: '127.0.0.1' })

const ho = new Hono()
ho.use('*', rateLimiter({ limiter: limiter('hono'), getConnInfo }))
ho.get('/', (c) => c.text('ok'))
const hoServer = serve({ fetch: ho.fetch, port: 0, hostname: '127.0.0.1' })
await new Promise((resolve) => hoServer.once('listening', resolve))

const portOf = (server: { address(): unknown }) => (server.address() as { port: number }).port
const urls = {
  express: \`http://127.0.0.1:\${portOf(exServer)}/\`,
  fastify: \`http://127.0.0.1:\${portOf(fa.server)}/\`,
  hono: \`http://127.0.0.1:\${portOf(hoServer)}/\`,
}
const out: Record<string, unknown> = {}
for (const [name, url] of Object.entries(urls)) {
  const first = await fetch(url)
  const second = await fetch(url)
  out[name] = [first.status, second.status, second.headers.get('ratelimit'), second.headers.get('retry-after')]
}
// The subpaths, and one class across entries (an error thrown by /http is the main entry's ConfigError).
let sameErrorClass = false
try {
  createHttpLimiter(JSON.parse('42'))
} catch (error) {
  sameErrorClass = error instanceof ConfigError
}
const spent = await limiter('cli').consume('user:1') // read back by \`tollgate inspect\`
out.subpaths = {
  ip: canonicalIp('::ffff:10.0.0.1'),
  sha1: CONSUME.sha1,
  key: buildKey('p', 'user:1', keySignature('sliding-window', 60000)),
  headers: Object.keys(rateLimitHeaders(spent, { format: 'ietf' })),
  channel: CHANNEL_NAMES.decision,
  eachPolicyOutcome: typeof eachPolicyOutcome,
  sameErrorClass,
}
out.refusedSeries = (await registry.metrics()).split('\\n').filter((l) => /^tollgate_decisions_total\\{.*outcome="refused"/.test(l)).length
metrics.stop()
otel.stop()
console.log(JSON.stringify(out))
exServer.close()
hoServer.close()
await fa.close()
await redis.quit()
`
/** Type annotations out, for the .mjs and .cjs apps. */
const untyped = (ts: string) =>
  ts
    .replace(/\(name: string\)/g, '(name)')
    .replace(/\(server: \{ address\(\): unknown \}\)/g, '(server)')
    .replace(/ as \{ port: number \}/g, '')
    .replace(/const out: Record<string, unknown> = \{\}/, 'const out = {}')
const APP_CJS = `(async () => {\n${untyped(APP_ESM)
  .replace(
    /^import \{ ([^}]+) \} from '([^']+)'$/gm,
    (_m, names: string, from: string) => `const { ${names} } = require('${from}')`,
  )
  .replace(/^import (\w+) from '([^']+)'$/gm, (_m, name: string, from: string) =>
    from === '@tollgate/fastify'
      ? `const { tollgate: ${name} } = require('${from}')`
      : `const ${name} = require('${from}')`,
  )}})().catch((error) => { console.error(error); process.exit(1) })\n`

function tsconfig(extra: Record<string, unknown>, include: string[]): string {
  return JSON.stringify({
    compilerOptions: { strict: true, target: 'es2022', types: ['node'], skipLibCheck: false, ...extra },
    include,
  })
}

describe('the packages as published', () => {
  let work: string
  const tarballs = {} as Record<PublicPackage, string>

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-published-'))
    Object.assign(tarballs, await packPublicPackages())
  }, 600_000)

  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true })
  })

  it.each(PACKAGES)(
    '@tollgate/%s passes publint --strict and attw',
    async (name) => {
      const lint = await sh(bin('publint'), ['run', tarballs[name], '--strict'], work)
      expect(lint.stdout).toMatch(/All good!/) // suggestions count too
      // attw exits non-zero on any problem; `--profile node16` is not used: node10 resolution is checked too.
      const types = await sh(bin('attw'), [tarballs[name], '--format', 'ascii'], work)
      expect(types.stdout).toMatch(/No problems found/)
      // What npm shows on the package page.
      const { stdout: files } = await sh('tar', ['-tzf', tarballs[name]], work)
      expect(files.split('\n')).toContain('package/README.md')
      const { stdout: manifest } = await sh('tar', ['-xOzf', tarballs[name], 'package/package.json'], work)
      const pkg = JSON.parse(manifest)
      expect({
        name: pkg.name,
        repository: pkg.repository,
        homepage: pkg.homepage,
        bugs: pkg.bugs,
        license: pkg.license,
        engines: pkg.engines,
      }).toEqual({
        name: `@tollgate/${name}`,
        repository: {
          type: 'git',
          url: 'git+https://github.com/tollgate-js/tollgate.git',
          directory: `packages/${name}`,
        },
        homepage: `https://github.com/tollgate-js/tollgate/tree/main/packages/${name}#readme`,
        bugs: 'https://github.com/tollgate-js/tollgate/issues',
        license: 'MIT',
        engines: { node: '>=20.16' },
      })
      expect(pkg.keywords).toEqual(expect.arrayContaining(['rate-limit']))
      expect(pkg.files).toEqual(expect.arrayContaining(['dist', 'README.md']))
      expect(JSON.stringify(pkg)).not.toContain('workspace:')
      // The README as npm shows it: links that work outside the repository, an install line naming the peers.
      const { stdout: readme } = await sh('tar', ['-xOzf', tarballs[name], 'package/README.md'], work)
      expect({ name, relativeLinks: readme.match(/\]\((?!https?:|#)[^)]*\)/g) ?? [] }).toEqual({
        name,
        relativeLinks: [],
      })
      const peers = Object.keys(pkg.peerDependencies ?? {})
      if (name !== 'cli') {
        const install = readme.split('\n').find((l: string) => l.startsWith(`npm install @tollgate/${name}`))
        expect({ name, install: install?.split(' ').slice(2) }).toEqual({
          name,
          install: expect.arrayContaining([`@tollgate/${name}`, ...peers]),
        })
      }
    },
    120_000,
  )

  it('installs into ESM, CommonJS and TypeScript (node16, bundler) apps, each serving a 200 then a 429 per framework, importing every subpath, with metrics and the CLI', async () => {
    const app = path.join(work, 'app')
    fs.mkdirSync(path.join(app, 'node16'), { recursive: true })
    fs.mkdirSync(path.join(app, 'bundler'), { recursive: true })
    const deps = Object.fromEntries(PACKAGES.map((n) => [`@tollgate/${n}`, `file:${tarballs[n]}`]))
    fs.writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({
        name: 'published-smoke',
        private: true,
        dependencies: { ...deps, ...THIRD_PARTY, ...TYPES },
      }),
    )
    await sh('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], app)
    fs.writeFileSync(path.join(app, 'app.mjs'), untyped(APP_ESM))
    fs.writeFileSync(path.join(app, 'app.cjs'), APP_CJS)
    fs.writeFileSync(path.join(app, 'node16/app.mts'), APP_ESM)
    fs.writeFileSync(path.join(app, 'bundler/package.json'), JSON.stringify({ type: 'module' }))
    fs.writeFileSync(path.join(app, 'bundler/app.ts'), APP_ESM)
    fs.writeFileSync(
      path.join(app, 'tsconfig.node16.json'),
      tsconfig({ module: 'node16', moduleResolution: 'node16', rootDir: 'node16', outDir: 'out-node16' }, [
        'node16/app.mts',
      ]),
    )
    fs.writeFileSync(
      path.join(app, 'tsconfig.bundler.json'),
      tsconfig({ module: 'esnext', moduleResolution: 'bundler', rootDir: 'bundler', outDir: 'out-bundler' }, [
        'bundler/app.ts',
      ]),
    )
    await sh('node', [tsc, '-p', 'tsconfig.node16.json'], app)
    await sh('node', [tsc, '-p', 'tsconfig.bundler.json'], app)
    fs.writeFileSync(path.join(app, 'out-bundler/package.json'), JSON.stringify({ type: 'module' }))

    const env = { REDIS_URL: redisUrl() }
    const runs: [string, string][] = [
      ['esm', 'app.mjs'],
      ['cjs', 'app.cjs'],
      ['node16', 'out-node16/app.mjs'],
      ['bundler', 'out-bundler/app.js'],
    ]
    let lastPrefix = ''
    for (const [flavour, file] of runs) {
      lastPrefix = `published-${flavour}-${Date.now()}`
      const { stdout } = await sh('node', [file], app, { ...env, PREFIX: lastPrefix })
      const result = JSON.parse(stdout.trim().split('\n').pop()!)
      for (const framework of ['express', 'fastify', 'hono']) {
        const [first, second, header, retryAfter] = result[framework]
        expect({ flavour, framework, first, second }).toEqual({ flavour, framework, first: 200, second: 429 })
        expect(header).toMatch(/^"default";r=0;t=\d+;pk=:[A-Za-z0-9+/=]+:$/)
        expect(Number(retryAfter)).toBeGreaterThanOrEqual(1)
      }
      expect({ flavour, ...result.subpaths }).toEqual({
        flavour,
        ip: '10.0.0.1',
        sha1: expect.stringMatching(/^[0-9a-f]{40}$/),
        key: expect.stringContaining('{user:1}'),
        headers: ['RateLimit-Policy', 'RateLimit'],
        channel: 'tollgate:decision',
        eachPolicyOutcome: 'function',
        sameErrorClass: true,
      })
      // @tollgate/prometheus counted each framework's refusal (one series per limiter).
      expect({ flavour, refusedSeries: result.refusedSeries }).toEqual({ flavour, refusedSeries: 3 })
    }

    // The bin of @tollgate/cli, as npm installs it, reads what the last app spent.
    const help = await sh(path.join(app, 'node_modules/.bin/tollgate'), ['--help'], app)
    expect(help.stdout).toMatch(/^Usage: tollgate/)
    const prefix = `${lastPrefix}-cli`
    const inspect = await sh(
      path.join(app, 'node_modules/.bin/tollgate'),
      ['inspect', 'user:1', '--prefix', prefix, '--limit', '1', '--window', '1h', '--json'],
      app,
      env,
    )
    const read = JSON.parse(inspect.stdout)
    expect(read).toEqual({
      prefix,
      identities: [{ identity: 'user:1' }],
      stored: true,
      policies: [
        expect.objectContaining({
          identity: 'user:1',
          policy: 'default',
          key: `${prefix}:{user:1}:sw-1h`,
          limit: 1,
          remaining: 0,
        }),
      ],
    })
    // refused: the next call of cost 1 waits
    expect(read.policies[0].retryAfterMs).toBeGreaterThan(0)
  }, 600_000)
})
