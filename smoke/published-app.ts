/**
 * The app that installs every public package at once (smoke/registry.test.ts): one process serves
 * Express, Fastify and Hono, each limited once (a 200, then a 429 with the IETF headers), imports
 * `@tollgate/http` and the subpaths of `@tollgate/core` (`/observability`, `/scripts`), counts the
 * refusals with `@tollgate/prometheus` and runs `@tollgate/opentelemetry`; it prints one JSON line.
 * The same source runs as ESM, as CommonJS, and as TypeScript checked under `node16` and `bundler`.
 * @module
 */

// The versions the workspace tests against (TOOLCHAIN.md).
export const THIRD_PARTY = {
  express: '5.3.0',
  fastify: '5.12.8',
  hono: '4.13.19',
  '@hono/node-server': '2.1.8',
  redis: '6.3.1',
  'prom-client': '15.1.3',
  '@opentelemetry/api': '1.9.1',
  graphql: '16.15.0',
}
export const TYPES = { '@types/express': '5.0.6', '@types/node': '20.19.43' }

/** The app, in a syntax ESM JavaScript and TypeScript share. Prints one JSON line, then exits. */
export const APP_ESM = `import { CHANNEL_NAMES, ConfigError, RateLimiter, RedisStore } from '@tollgate/core'
import { canonicalIp, createHttpLimiter, rateLimitHeaders } from '@tollgate/http'
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
// The subpaths, and one class across packages (an error thrown by @tollgate/http is core's ConfigError).
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
export const untyped = (ts: string) =>
  ts
    .replace(/\(name: string\)/g, '(name)')
    .replace(/\(server: \{ address\(\): unknown \}\)/g, '(server)')
    .replace(/ as \{ port: number \}/g, '')
    .replace(/const out: Record<string, unknown> = \{\}/, 'const out = {}')
export const APP_CJS = `(async () => {\n${untyped(APP_ESM)
  .replace(
    /^import \{ ([^}]+) \} from '([^']+)'$/gm,
    (_m, names: string, from: string) => `const { ${names} } = require('${from}')`,
  )
  .replace(/^import (\w+) from '([^']+)'$/gm, (_m, name: string, from: string) =>
    from === '@tollgate/fastify'
      ? `const { tollgate: ${name} } = require('${from}')`
      : `const ${name} = require('${from}')`,
  )}})().catch((error) => { console.error(error); process.exit(1) })\n`

export function appTsconfig(extra: Record<string, unknown>, include: string[]): string {
  return JSON.stringify({
    compilerOptions: { strict: true, target: 'es2022', types: ['node'], skipLibCheck: false, ...extra },
    include,
  })
}
