/**
 * An application can mix the two builds of the packages: its own code imports `@tollgate/core` as ESM
 * while a CommonJS module requires `@tollgate/express` (which requires the CommonJS core), or the other
 * way round. The packed packages (the run's tarballs, built by their `prepack`) are unpacked as npm
 * installs them (their `publishConfig` exports, so `import` gets the .js files and `require` the .cjs
 * ones), and a child process hands a limiter of one build to the Express adapter of the other: it serves
 * requests with the limiter's headers, answers a key function's bad answer with a 500, and the errors of
 * one build are `instanceof` the classes of the other.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { packPublicPackages, redisUrl } from '@tollgate/testkit'

const run = promisify(execFile)
const root = path.resolve(__dirname, '..')
const PACKAGES = ['core', 'http', 'express'] as const

/**
 * The child: `LIMITER` is the core its limiter comes from, `ADAPTER` the Express adapter's build. Prints
 * one JSON line.
 */
const CHILD = `
import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const load = (name, build) => (build === 'cjs' ? require(name) : import(name))
const limiterCore = await load('@tollgate/core', process.env.LIMITER)
const adapterCore = await load('@tollgate/core', process.env.ADAPTER)
const { rateLimit } = await load('@tollgate/express', process.env.ADAPTER)
const express = require(process.env.EXPRESS)
const { createClient } = require(process.env.REDIS)

const redis = await createClient({ url: process.env.REDIS_URL }).on('error', () => {}).connect()
const { RateLimiter, RedisStore } = limiterCore
const limiter = new RateLimiter({ store: new RedisStore(redis), prefix: process.env.PREFIX, limit: 1, window: '1d' })
const app = express()
app.get('/', rateLimit({ limiter }), (_req, res) => res.send('ok'))
app.get('/bad', rateLimit({ limiter, key: () => '' }), (_req, res) => res.send('ok'))
app.get('/tier', rateLimit({ limiter: () => limiter, key: () => 'tier' }), (_req, res) => res.send('ok'))
const server = app.listen(0, '127.0.0.1')
await new Promise((resolve) => server.once('listening', resolve))
const url = 'http://127.0.0.1:' + server.address().port
const seen = async (path) => {
  const res = await fetch(url + path)
  return [res.status, res.headers.get('ratelimit'), res.headers.get('retry-after')]
}
const out = { first: await seen('/'), second: await seen('/'), bad: await seen('/bad'), tier: await seen('/tier') }

// The errors one build throws are the other build's classes too.
const caught = (fn) => { try { fn() } catch (error) { return error } }
const input = await limiter.consume('').catch((error) => error)
const config = caught(() => rateLimit({ limiter: { not: 'a limiter', state: 'x'.repeat(100000) } }))
out.errors = {
  inputIsAdapterInputError: input instanceof adapterCore.InputError,
  inputIsAdapterRateLimitError: input instanceof adapterCore.RateLimitError,
  inputIsNotAdapterConfigError: !(input instanceof adapterCore.ConfigError),
  configIsLimiterConfigError: config instanceof limiterCore.ConfigError,
  configMessage: config.message,
  limiterIsAdapterRateLimiter: limiter instanceof adapterCore.RateLimiter,
  storeIsAdapterRedisStore: limiter.store instanceof adapterCore.RedisStore,
}
console.log(JSON.stringify(out))
server.close()
await redis.quit()
`

async function sh(command: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  try {
    return await run(command, args, { cwd, env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024 })
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string }
    throw new Error(`${command} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`)
  }
}

describe('a limiter of one build works with the adapter of the other', () => {
  let work: string
  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-cross-build-'))
    const modules = path.join(work, 'node_modules')
    // The tarballs the run's other package suites use: packed (and built) once per run.
    const tarballs = await packPublicPackages()
    for (const name of PACKAGES) {
      // Installed as npm would: the tarball's files, its package.json with the published exports.
      const target = path.join(modules, '@tollgate', name)
      fs.mkdirSync(target, { recursive: true })
      await sh('tar', ['-xzf', tarballs[name], '-C', target, '--strip-components=1'], work)
    }
    // The core's one dependency, as installed in the workspace.
    const hashes = fs.realpathSync(path.join(root, 'packages/core/node_modules/@noble/hashes'))
    fs.mkdirSync(path.join(modules, '@noble'), { recursive: true })
    fs.symlinkSync(hashes, path.join(modules, '@noble', 'hashes'))
    fs.writeFileSync(path.join(work, 'child.mjs'), CHILD)
  }, 600_000)
  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true })
  })

  it.each([
    ['esm', 'cjs'],
    ['cjs', 'esm'],
    ['esm', 'esm'],
    ['cjs', 'cjs'],
  ])('a %s limiter, the %s Express adapter', async (limiterBuild, adapterBuild) => {
    const { stdout } = await sh('node', ['child.mjs'], work, {
      LIMITER: limiterBuild,
      ADAPTER: adapterBuild,
      EXPRESS: fs.realpathSync(path.join(root, 'packages/express/node_modules/express')),
      REDIS: fs.realpathSync(path.join(root, 'node_modules/redis')),
      REDIS_URL: redisUrl(),
      PREFIX: `cross-build-${process.pid}-${Date.now()}-${limiterBuild}-${adapterBuild}`,
    })
    const out = JSON.parse(stdout.trim().split('\n').pop()!)
    expect(out.first).toEqual([200, expect.stringMatching(/^"default";r=0;t=\d+;pk=:[^:]+:$/), null])
    expect(out.second).toEqual([
      429,
      expect.stringMatching(/^"default";r=0;t=\d+;pk=:[^:]+:$/),
      expect.stringMatching(/^\d+$/),
    ])
    expect(out.bad[0]).toBe(500)
    expect(out.tier).toEqual([200, expect.stringMatching(/^"default";r=0;t=\d+;pk=:[^:]+:$/), null])
    expect(out.errors).toEqual({
      inputIsAdapterInputError: true,
      inputIsAdapterRateLimitError: true,
      inputIsNotAdapterConfigError: true,
      configIsLimiterConfigError: true,
      configMessage: expect.stringMatching(
        /^limiter must be a RateLimiter or a function returning one, received /,
      ),
      limiterIsAdapterRateLimiter: true,
      storeIsAdapterRedisStore: true,
    })
    expect(out.errors.configMessage.length).toBeLessThanOrEqual(200)
  })
})
