/**
 * The packages the way users install them: every public package is packed from a clean tree (`pnpm pack`:
 * its `prepack` builds it, `publishConfig` applies, `workspace:` ranges become versions), published to a
 * local npm registry (Verdaccio, which npm asks for `@tollgate/*`; third-party packages come from the
 * public registry), then installed with plain `npm install` into fresh apps outside the workspace, each
 * package set once per run.
 *
 * Each tarball passes `publint --strict` and `attw` (are the types wrong), and its package.json carries the
 * metadata npm and other tools show (repository with its directory, homepage, bugs, keywords, license,
 * engines, files); its README has no relative links and an install line naming the peers.
 *
 * One app per framework version (smoke/registry-apps.ts): Express 4 and 5, Fastify 4 and 5, Hono on Node
 * (@hono/node-server), a fetch handler (@tollgate/fetch on @hono/node-server), NestJS 12 (its Express
 * platform; decorators applied as calls, so plain JavaScript runs it). Each app folder holds the same app
 * three times:
 *
 *   app.mjs       ESM JavaScript
 *   app.cjs       CommonJS JavaScript (`require`)
 *   src/app.mts   strict TypeScript, `module: nodenext`, type-checked by tsc and run as emitted
 *
 * Express 4's app also type-checks the declaration files (the packages' own against @types/express@4).
 * Each serves two 200s, then a 429 with RateLimit, RateLimit-Policy, Retry-After and a problem+json body,
 * from the test's redis-server. The Hono app also installs @tollgate/prometheus, @tollgate/opentelemetry
 * and @tollgate/cli, whose `tollgate` bin runs through `npx tollgate --help`.
 *
 * One more app installs every package together (smoke/published-app.ts) and runs as ESM, CommonJS, and
 * TypeScript checked with declaration files under `node16` and under `bundler` resolution; the
 * `tollgate` bin of `@tollgate/cli` then reads the state it left.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  at,
  PUBLIC_PACKAGES,
  type PublicPackage,
  packPublicPackages,
  type RegistryHandle,
  redisUrl,
  sh,
  startRegistry,
} from '@tollgate/testkit'
import { APP_CJS, APP_ESM, appTsconfig, THIRD_PARTY, TYPES, untyped } from './published-app'
import {
  appSource,
  commonJs,
  FRAMEWORKS,
  type Framework,
  NPM_INSTALL,
  REDIS,
  TYPES_NODE,
  tsconfig,
  version,
} from './registry-apps'

const root = path.resolve(__dirname, '..')
const tsc = path.join(root, 'node_modules/typescript/bin/tsc')
const bin = (name: string) => path.join(root, 'node_modules/.bin', name)
/** The folder of the app that installs every package. */
const EVERY = 'every-package'

describe('the packages from a registry, installed with npm', () => {
  let work: string
  let registry: RegistryHandle
  const tarballs = {} as Record<PublicPackage, string>

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-registry-apps-'))
    const started = Date.now()
    registry = await startRegistry()
    Object.assign(tarballs, await packPublicPackages())
    const packed = Date.now()
    for (const name of PUBLIC_PACKAGES) {
      await sh('npm', ['publish', tarballs[name], '--registry', registry.url], work, registry.env)
    }
    // Every package any app needs, fetched once into npm's cache (one npm process fetches each
    // package document once; apps installing side by side would each ask the registry for it). The
    // framework versions go in under aliases, as two majors cannot share one folder.
    const prefetch = path.join(work, 'prefetch')
    fs.mkdirSync(prefetch)
    const all: Record<string, string> = {}
    for (const [name, dependencies] of apps()) {
      for (const [dep, range] of Object.entries(dependencies))
        all[`${name}-${dep.replace(/^@/, '').replace('/', '-')}`] = `npm:${dep}@${range}`
    }
    fs.writeFileSync(
      path.join(prefetch, 'package.json'),
      JSON.stringify({ name: 'prefetch', private: true, dependencies: all }),
    )
    await sh('npm', [...NPM_INSTALL, '--package-lock-only', '--ignore-scripts'], prefetch, registry.env)
    // Then the apps, side by side, from that cache.
    installed = Promise.allSettled(apps().map(([name, dependencies]) => install(name, dependencies)))
    await installed
    console.log(
      `registry: packed in ${(packed - started) / 1000} s, published and installed in ${(Date.now() - packed) / 1000} s`,
    )
  }, 900_000)

  const dependenciesOf = (framework: Framework): Record<string, string> => ({
    '@tollgate/core': version('core'),
    [`@tollgate/${framework.adapter}`]: version(framework.adapter),
    redis: REDIS,
    '@types/node': TYPES_NODE,
    ...framework.dependencies,
  })
  /** Every app's folder name and dependencies: one per framework, then the one with every package. */
  const apps = (): [string, Record<string, string>][] => [
    ...FRAMEWORKS.map((f): [string, Record<string, string>] => [f.name, dependenciesOf(f)]),
    [
      EVERY,
      {
        ...Object.fromEntries(PUBLIC_PACKAGES.map((n) => [`@tollgate/${n}`, version(n)])),
        ...THIRD_PARTY,
        ...TYPES,
      },
    ],
  ]

  let installed: Promise<PromiseSettledResult<void>[]> | undefined
  const install = async (name: string, dependencies: Record<string, string>) => {
    const app = path.join(work, name)
    fs.mkdirSync(path.join(app, 'src'), { recursive: true })
    fs.writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({ name: `registry-${name}`, private: true, dependencies }),
    )
    await sh('npm', NPM_INSTALL, app, registry.env)
  }

  afterAll(async () => {
    await registry?.stop()
    if (work) fs.rmSync(work, { recursive: true, force: true })
  })

  it('every package built itself when packed, and the registry serves it with its metadata', async () => {
    for (const name of PUBLIC_PACKAGES) {
      const { stdout } = await sh('tar', ['-tzf', tarballs[name]], work)
      const files = stdout.split('\n')
      expect({
        name,
        esm: files.includes('package/dist/index.js'),
        cjs: files.includes('package/dist/index.cjs'),
      }).toEqual({ name, esm: true, cjs: true })
      if (name === 'core') expect(files).toContain('package/lua/consume.lua')
      const doc = await (await fetch(`${registry.url}@tollgate%2f${name}`)).json()
      const published = doc.versions[version(name)]
      expect({ name, directory: published.repository?.directory, bugs: published.bugs?.url }).toEqual({
        name,
        directory: `packages/${name}`,
        bugs: 'https://github.com/tollgate-js/tollgate/issues',
      })
      // `workspace:` ranges became versions the registry can resolve.
      expect(JSON.stringify(published.dependencies ?? {})).not.toContain('workspace:')
    }
  })

  it.each(PUBLIC_PACKAGES)(
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
      // Optional peers (one per server a package supports) may each have an install line of their own.
      const optional = pkg.peerDependenciesMeta ?? {}
      const peers = Object.keys(pkg.peerDependencies ?? {})
      const required = peers.filter((p) => optional[p]?.optional !== true)
      if (name !== 'cli') {
        const lines = readme.split('\n').filter((l: string) => l.startsWith(`npm install @tollgate/${name} `))
        const words = (l: string | undefined) => l?.split(' ').slice(2)
        expect({ name, install: words(lines[0]) }).toEqual({
          name,
          install: expect.arrayContaining([`@tollgate/${name}`, ...required]),
        })
        const named = new Set(lines.flatMap((l: string) => words(l) ?? []))
        expect({ name, missing: peers.filter((p) => !named.has(p)) }).toEqual({ name, missing: [] })
      }
    },
    120_000,
  )

  it.each(FRAMEWORKS.map((f) => [f.name, f] as const))(
    '%s: ESM, CommonJS and strict TypeScript (nodenext) apps serve 200, 200, then a 429 with its headers',
    async (name, framework) => {
      const app = path.join(work, name)
      const outcome = at(await installed!, FRAMEWORKS.indexOf(framework))
      if (outcome.status === 'rejected') throw outcome.reason

      const esm = appSource(framework)
      fs.writeFileSync(path.join(app, 'app.mjs'), esm)
      fs.writeFileSync(path.join(app, 'app.cjs'), commonJs(esm))
      fs.writeFileSync(path.join(app, 'src/app.mts'), esm)
      fs.writeFileSync(path.join(app, 'tsconfig.json'), tsconfig(framework.libCheck === true))
      await sh('node', [tsc, '-p', 'tsconfig.json'], app)

      for (const [flavour, file] of [
        ['esm', 'app.mjs'],
        ['cjs', 'app.cjs'],
        ['typescript', 'out/app.mjs'],
      ] as const) {
        const prefix = `registry-${name}-${flavour}-${process.pid}-${Date.now().toString(36)}`
        const { stdout } = await sh('node', [file], app, { REDIS_URL: redisUrl(), PREFIX: prefix })
        const answers = JSON.parse(stdout.trim().split('\n').pop()!)
        const tag = { app: name, flavour }
        expect({ ...tag, statuses: answers.map((a: { status: number }) => a.status) }).toEqual({
          ...tag,
          statuses: [200, 200, 429],
        })
        expect({ ...tag, first: answers[0].ratelimit }).toEqual({
          ...tag,
          first: expect.stringMatching(/^"default";r=1;t=\d+/),
        })
        const refused = answers[2]
        expect({ ...tag, ...refused, body: JSON.parse(refused.body) }).toEqual({
          ...tag,
          status: 429,
          ratelimit: expect.stringMatching(/^"default";r=0;t=\d+/),
          policy: expect.stringMatching(/^"default";q=2;w=86400/),
          retryAfter: expect.stringMatching(/^[1-9]\d*$/),
          contentType: expect.stringMatching(/^application\/problem\+json/),
          body: expect.objectContaining({ status: 429, 'violated-policies': ['default'] }),
        })
      }

      if (name === 'hono') {
        // The bin as a user runs it; npx finds it in the app's node_modules/.bin.
        const help = await sh('npx', ['tollgate', '--help'], app, registry.env)
        expect(help.stdout).toMatch(/^Usage: tollgate/)
      }
    },
    120_000,
  )

  it('installs into ESM, CommonJS and TypeScript (node16, bundler) apps, each serving a 200 then a 429 per framework, importing every subpath, with metrics and the CLI', async () => {
    const app = path.join(work, EVERY)
    const outcome = (await installed!)[FRAMEWORKS.length]!
    if (outcome.status === 'rejected') throw outcome.reason
    fs.mkdirSync(path.join(app, 'node16'), { recursive: true })
    fs.mkdirSync(path.join(app, 'bundler'), { recursive: true })
    fs.writeFileSync(path.join(app, 'app.mjs'), untyped(APP_ESM))
    fs.writeFileSync(path.join(app, 'app.cjs'), APP_CJS)
    fs.writeFileSync(path.join(app, 'node16/app.mts'), APP_ESM)
    fs.writeFileSync(path.join(app, 'bundler/package.json'), JSON.stringify({ type: 'module' }))
    fs.writeFileSync(path.join(app, 'bundler/app.ts'), APP_ESM)
    fs.writeFileSync(
      path.join(app, 'tsconfig.node16.json'),
      appTsconfig({ module: 'node16', moduleResolution: 'node16', rootDir: 'node16', outDir: 'out-node16' }, [
        'node16/app.mts',
      ]),
    )
    fs.writeFileSync(
      path.join(app, 'tsconfig.bundler.json'),
      appTsconfig(
        { module: 'esnext', moduleResolution: 'bundler', rootDir: 'bundler', outDir: 'out-bundler' },
        ['bundler/app.ts'],
      ),
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
