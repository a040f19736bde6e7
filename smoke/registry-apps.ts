/**
 * The apps smoke/registry.test.ts installs from its registry, one per framework version, each written
 * three times (ESM, CommonJS, strict TypeScript): their dependencies and their source.
 * @module
 */
import fs from 'node:fs'
import path from 'node:path'
import type { PublicPackage } from '@tollgate/testkit'

const root = path.resolve(__dirname, '..')
export const version = (name: PublicPackage): string =>
  JSON.parse(fs.readFileSync(path.join(root, 'packages', name, 'package.json'), 'utf8')).version
export const NPM_INSTALL = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error']
export const TYPES_NODE = '20.19.43'
export const REDIS = '6.3.1'

export interface Framework {
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

export const FRAMEWORKS: Framework[] = [
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
export const appSource = (f: Framework) => `import { once } from 'node:events'
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
export const commonJs = (esm: string) => {
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
export const tsconfig = (libCheck: boolean) =>
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
