/**
 * Summarises V8 CPU profiles of the HTTP benchmark's servers (`BENCH_HTTP_CPU_PROF=<dir> pnpm bench:http`):
 * the functions with the most self time, as a share of the process' busy time (idle excluded), with the
 * package they come from. Used for the "where a request's time goes" table in docs/benchmarks.md.
 *
 * Summarise: `node --import tsx benchmarks/lib/http-profile.mts <file.cpuprofile>... [--top 15]`
 *
 * Or profile a few servers without the whole benchmark: each runs alone under the benchmark's load
 * (50 connections) for `seconds`, against its own redis-server, and the summary follows:
 * `node --import tsx benchmarks/lib/http-profile.mts run <dir> <seconds> <framework>/<variant>...`
 * @module
 */
import fs from 'node:fs'
import path from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** `node_modules/.pnpm/fastify@5.12.8/node_modules/fastify/lib/x.js` → `fastify/lib/x.js`; ours → `core/src/x.ts`. */
function shortUrl(url: string): string {
  const file = url.replace(/^file:\/\//, '')
  const nm = file.lastIndexOf('/node_modules/')
  if (nm >= 0) return file.slice(nm + '/node_modules/'.length)
  const pkg = /\/packages\/(.+)$/.exec(file)
  if (pkg) return `@tollgate/${pkg[1]}`
  return file.startsWith('node:') || file === '' ? file || '(native)' : path.basename(file)
}

/** Where a function comes from: a package, Node's own JavaScript, or native code (syscalls, GC). */
function packageOf(name: string): string {
  const where = name.slice(name.lastIndexOf(' ') + 1)
  if (!where.includes(':') && !where.includes('/')) return name.startsWith('(garbage') ? 'GC' : 'native'
  if (where.startsWith('node:')) return 'node'
  const parts = where.split('/')
  return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!.replace(/:\d+$/, '')
}

/** Self time per function (name + file + line), in ms, and the busy total. */
export function selfTimes(profile: Profile): { total: number; rows: Array<[string, number]> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<string, number>()
  let total = 0
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]!)!
    const { functionName, url, lineNumber } = node.callFrame
    if (functionName === '(idle)') continue
    const ms = (profile.timeDeltas[i] ?? 0) / 1000
    total += ms
    const name = `${functionName || '(anonymous)'} ${url ? `${shortUrl(url)}:${lineNumber + 1}` : ''}`.trim()
    self.set(name, (self.get(name) ?? 0) + ms)
  }
  return { total, rows: [...self].sort((a, b) => b[1] - a[1]) }
}

const isMain = process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))
if (isMain && process.argv[2] === 'run') {
  const [dir, seconds, ...servers] = process.argv.slice(3)
  const { startServer } = await import('./http-process.mts')
  const { load } = await import('./http-load.mts')
  const { startBenchRedis } = await import('./redis-server')
  const { IDENTITIES, IDENTITY_HEADER, keyedOnHeader, PATH } = await import('./http-variants.mts')
  process.env.BENCH_HTTP_CPU_PROF = path.resolve(dir!)
  const redis = await startBenchRedis()
  try {
    for (const name of servers) {
      const [framework, variant] = name.split('/') as [never, never]
      const server = await startServer(framework, variant, redis.url, `prof-${framework}-${variant}`)
      const run = await load(server.url, {
        connections: 50,
        durationS: Number(seconds),
        path: PATH,
        ...(keyedOnHeader(variant) ? { identityHeader: IDENTITY_HEADER, identities: IDENTITIES } : {}),
      })
      await server.stop()
      console.error(`${name}: ${Math.round(run.rps)} req/s, statuses ${JSON.stringify(run.statuses)}`)
    }
  } finally {
    await redis.stop()
  }
} else if (isMain) {
  const args = process.argv.slice(2)
  const topAt = args.indexOf('--top')
  const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 15
  const pct = (ms: number, total: number) => ((100 * ms) / total).toFixed(1)
  for (const file of args) {
    const { total, rows } = selfTimes(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile)
    console.log(`\n${path.basename(file)}: ${(total / 1000).toFixed(1)} s busy`)
    const byPackage = new Map<string, number>()
    for (const [name, ms] of rows) byPackage.set(packageOf(name), (byPackage.get(packageOf(name)) ?? 0) + ms)
    console.log(
      [...byPackage]
        .sort((a, b) => b[1] - a[1])
        .map(([p, ms]) => `${p} ${pct(ms, total)}%`)
        .join(', '),
    )
    console.log('| self % | function | where |\n| ---: | --- | --- |')
    const own = rows.filter(([name]) => name.includes('@tollgate/'))
    for (const [name, ms] of [...rows.slice(0, top), ...own.slice(0, top)]) {
      const [fn, ...where] = name.split(' ')
      console.log(`| ${pct(ms, total)} | \`${fn}\` | ${where.join(' ')} |`)
    }
  }
}
