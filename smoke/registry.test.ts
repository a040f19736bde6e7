/**
 * The packages the way users install them: every public package is packed from a clean tree (its
 * `prepack` builds it), published to a local npm registry (Verdaccio, which npm asks for `@tollgate/*`; third-party
 * packages come from the public registry), then installed with plain `npm install` into fresh apps outside the workspace,
 * one per framework version: Express 4 and 5, Fastify 4 and 5, Hono on Node (@hono/node-server), a fetch
 * handler (@tollgate/fetch on @hono/node-server), NestJS 12 (its Express platform; decorators applied as
 * calls, so plain JavaScript runs it). Each app
 * folder holds the same app three times:
 *
 *   app.mjs       ESM JavaScript
 *   app.cjs       CommonJS JavaScript (`require`)
 *   src/app.mts   strict TypeScript, `module: nodenext`, type-checked by tsc and run as emitted
 *
 * Express 4's app also type-checks the declaration files (the packages' own against @types/express@4).
 * Each serves two 200s, then a 429 with RateLimit, RateLimit-Policy, Retry-After and a problem+json body,
 * from the test's redis-server. The Hono app also installs @tollgate/prometheus, @tollgate/opentelemetry
 * and @tollgate/cli, whose `tollgate` bin runs through `npx tollgate --help`.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  PUBLIC_PACKAGES,
  type PublicPackage,
  packPublicPackages,
  type RegistryHandle,
  redisUrl,
  sh,
  startRegistry,
} from '@tollgate/testkit'

const root = path.resolve(__dirname, '..')
const tsc = path.join(root, 'node_modules/typescript/bin/tsc')
const version = (name: PublicPackage): string =>
  JSON.parse(fs.readFileSync(path.join(root, 'packages', name, 'package.json'), 'utf8')).version
const NPM_INSTALL = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error']
const TYPES_NODE = '20.19.43'
const REDIS = '6.3.1'

interface Framework {
  /** The app folder's name. */
  name: string
  adapter: 'express' | 'fastify' | 'hono' | 'fetch' | 'nestjs'
  dependencies: Record<string, string>
  /** Imports in ESM syntax (turned into `require` for app.cjs). */
  imports: string
  /** Builds the app and answers the URL it serves, in `url`. Plain JavaScript that also type-checks. */
  serve: string
  close: string
  /** Type-check the declaration files too (skipLibCheck: false). */
  libCheck?: boolean
}

const FRAMEWORKS: Framework[] = [
  ...(
    [
      ['express4', '4.22.3', '4.17.25'],
      ['express5', '5.3.0', '5.0.6'],
    ] as const
  ).map(
    ([name, express, types]): Framework => ({
      name,
      adapter: 'express',
      dependencies: { express, '@types/express': types },
      imports: `import { rateLimit } from '@tollgate/express'\nimport express from 'express'`,
      serve: `const app = express()
app.get('/', rateLimit({ limiter }), (_req, res) => {
  res.send('ok')
})
const server = app.listen(0, '127.0.0.1')
await once(server, 'listening')
const address = server.address()
const url = \`http://127.0.0.1:\${typeof address === 'object' && address ? address.port : 0}/\``,
      close: 'server.close()',
      // Express 4's types are the older shape the adapter's declarations must also fit
      libCheck: name === 'express4',
    }),
  ),
  ...(
    [
      ['fastify4', '4.29.1'],
      ['fastify5', '5.12.8'],
    ] as const
  ).map(
    ([name, fastify]): Framework => ({
      name,
      adapter: 'fastify',
      dependencies: { fastify },
      imports: `import tollgate from '@tollgate/fastify'\nimport Fastify from 'fastify'`,
      serve: `const app = Fastify()
await app.register(tollgate, { limiter })
app.get('/', async () => 'ok')
const url = \`\${await app.listen({ port: 0, host: '127.0.0.1' })}/\``,
      close: 'await app.close()',
    }),
  ),
  {
    name: 'hono',
    adapter: 'hono',
    dependencies: {
      hono: '4.13.19',
      '@hono/node-server': '2.1.8',
      '@tollgate/prometheus': version('prometheus'),
      'prom-client': '15.1.3',
      '@tollgate/opentelemetry': version('opentelemetry'),
      '@opentelemetry/api': '1.9.1',
      '@tollgate/cli': version('cli'),
    },
    imports: `import { rateLimiter } from '@tollgate/hono'
import { instrumentTollgate } from '@tollgate/opentelemetry'
import { collectTollgateMetrics } from '@tollgate/prometheus'
import { serve } from '@hono/node-server'
import { getConnInfo } from '@hono/node-server/conninfo'
import { Hono } from 'hono'
import { Registry } from 'prom-client'`,
    serve: `const registry = new Registry()
const metrics = collectTollgateMetrics({ registry })
const otel = instrumentTollgate()
const app = new Hono()
app.use('*', rateLimiter({ limiter, getConnInfo }))
app.get('/', (c) => c.text('ok'))
const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
await once(server, 'listening')
const address = server.address()
const url = \`http://127.0.0.1:\${typeof address === 'object' && address ? address.port : 0}/\``,
    close: `const refusals = (await registry.metrics()).split('\\n').filter((l) => /^tollgate_decisions_total\\{.*outcome="refused"/.test(l))
if (refusals.length !== 1) throw new Error(\`expected one refused series, got \${refusals.length}\`)
metrics.stop()
otel.stop()
server.close()`,
  },
  {
    // A fetch handler, served on Node by @hono/node-server (Bun, Deno and Workers serve it as is).
    name: 'fetch',
    adapter: 'fetch',
    dependencies: { hono: '4.13.19', '@hono/node-server': '2.1.8' },
    imports: `import { withRateLimit } from '@tollgate/fetch'
import { serve } from '@hono/node-server'`,
    serve: `const handler = withRateLimit(() => new Response('ok'), {
  limiter,
  ip: (_req, env) => env.incoming.socket.remoteAddress,
})
const server = serve({ fetch: handler, port: 0, hostname: '127.0.0.1' })
await once(server, 'listening')
const address = server.address()
const url = \`http://127.0.0.1:\${typeof address === 'object' && address ? address.port : 0}/\``,
    close: 'server.close()',
  },
  {
    name: 'nestjs',
    adapter: 'nestjs',
    dependencies: {
      '@nestjs/common': '12.5.1',
      '@nestjs/core': '12.5.1',
      '@nestjs/platform-express': '12.5.1',
      'reflect-metadata': '0.2.2',
      rxjs: '7.8.2',
    },
    imports: `import 'reflect-metadata'
import { Controller, Get, Module } from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { TollgateGuard, TollgateModule } from '@tollgate/nestjs'`,
    serve: `class AppController {
  hello() {
    return 'ok'
  }
}
Get()(AppController.prototype, 'hello', Object.getOwnPropertyDescriptor(AppController.prototype, 'hello') ?? {})
Controller()(AppController)
class AppModule {}
Module({
  imports: [TollgateModule.forRoot({ limiter })],
  controllers: [AppController],
  providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
})(AppModule)
const app = await NestFactory.create(AppModule, { logger: false })
await app.listen(0, '127.0.0.1')
const url = \`\${await app.getUrl()}/\``,
    close: 'await app.close()',
  },
]

/**
 * The app: three requests, one JSON line of what came back. A GCRA limit of 2 a day, so no window
 * boundary falls between the requests.
 */
const appSource = (f: Framework) => `import { once } from 'node:events'
import { RateLimiter, RedisStore } from '@tollgate/core'
${f.imports}
import { createClient } from 'redis'

const redis = await createClient({ url: process.env.REDIS_URL }).on('error', () => {}).connect()
const limiter = new RateLimiter({ store: new RedisStore(redis), prefix: process.env.PREFIX, limit: 2, window: '1d', algorithm: 'gcra' })
${f.serve}
const answers = []
for (let i = 0; i < 3; i++) {
  const res = await fetch(url)
  answers.push({
    status: res.status,
    ratelimit: res.headers.get('ratelimit'),
    policy: res.headers.get('ratelimit-policy'),
    retryAfter: res.headers.get('retry-after'),
    contentType: res.headers.get('content-type'),
    body: await res.text(),
  })
}
console.log(JSON.stringify(answers))
${f.close}
await redis.quit()
`

/** The same app as CommonJS: `require`s, and the body in an async function (no top-level await). */
const commonJs = (esm: string) => {
  const lines = esm.split('\n')
  const requires = lines
    .filter((l) => l.startsWith('import '))
    .map((l) =>
      l
        .replace(/^import '([^']+)'$/, "require('$1')")
        .replace(/^import \{ ([^}]+) \} from '([^']+)'$/, "const { $1 } = require('$2')")
        .replace(
          /^import tollgate from '@tollgate\/fastify'$/,
          "const { tollgate } = require('@tollgate/fastify')",
        )
        .replace(/^import (\w+) from '([^']+)'$/, "const $1 = require('$2')"),
    )
  const body = lines.filter((l) => !l.startsWith('import '))
  return `'use strict'\n${requires.join('\n')}\n\n;(async () => {\n${body.join('\n')}\n})().catch((error) => {\n  console.error(error)\n  process.exit(1)\n})\n`
}

/**
 * Strict TypeScript for Node's own module resolution, as a user's tsconfig would say it; `libCheck` also
 * checks every declaration file the app reaches (the packages' own against that framework's types).
 */
const tsconfig = (libCheck: boolean) =>
  JSON.stringify({
    compilerOptions: {
      strict: true,
      module: 'nodenext',
      moduleResolution: 'nodenext',
      target: 'es2022',
      types: ['node'],
      rootDir: 'src',
      outDir: 'out',
      skipLibCheck: !libCheck,
    },
    include: ['src'],
  })

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
    for (const f of FRAMEWORKS) {
      for (const [dep, range] of Object.entries(dependenciesOf(f)))
        all[`${f.name}-${dep.replace(/^@/, '').replace('/', '-')}`] = `npm:${dep}@${range}`
    }
    fs.writeFileSync(
      path.join(prefetch, 'package.json'),
      JSON.stringify({ name: 'prefetch', private: true, dependencies: all }),
    )
    await sh('npm', [...NPM_INSTALL, '--package-lock-only', '--ignore-scripts'], prefetch, registry.env)
    // Then the apps, side by side, from that cache.
    installed = Promise.allSettled(FRAMEWORKS.map((f) => install(f)))
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

  let installed: Promise<PromiseSettledResult<void>[]> | undefined
  const install = async (framework: Framework) => {
    const app = path.join(work, framework.name)
    fs.mkdirSync(path.join(app, 'src'), { recursive: true })
    fs.writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({
        name: `registry-${framework.name}`,
        private: true,
        dependencies: dependenciesOf(framework),
      }),
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

  it.each(FRAMEWORKS.map((f) => [f.name, f] as const))(
    '%s: ESM, CommonJS and strict TypeScript (nodenext) apps serve 200, 200, then a 429 with its headers',
    async (name, framework) => {
      const app = path.join(work, name)
      const outcome = (await installed!)[FRAMEWORKS.indexOf(framework)]
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
})
