#!/usr/bin/env node
/**
 * `pnpm demo`: four processes share one limit.
 *
 * Redis: REDIS_URL if set; else a redis-server on PATH, spawned on a free port and stopped on exit (also
 * on Ctrl-C); else an in-process MemoryStore, and then the four "workers" run in one process.
 *
 * 1. four processes (scripts/demo-worker.mts) connect and warm up, are released together, and each fires
 *    25 concurrent consume('demo-user') against limit 5 per 2 s: 5 of 100 are admitted;
 * 2. after the retry time the refused decisions gave, the same burst is admitted again (what the window
 *    has freed by then);
 * 3. the same burst against a naive GET-then-INCR limiter over-admits;
 * 4. HTTP: one small server per framework (scripts/demo-http-server.mts: Express, Fastify, Hono on
 *    @hono/node-server, each limited by its Tollgate adapter) on the same Redis gets 8 requests back to
 *    back against a limit of 5; the statuses and the RateLimit / RateLimit-Policy / Retry-After headers
 *    of the last allowed and the first refused response are printed;
 * 5. an outage: an Express server on a redis-server of its own (POST /login with onStoreError 'deny',
 *    GET /api with 'allow') gets a request per route every 100 ms while that redis-server is killed and
 *    restarted: /login answers 503, /api 200 without RateLimit headers, and then Redis decides again
 *    (recovery time measured) and the limit is enforced. Skipped without a redis-server on PATH.
 *
 * The HTTP servers start with the workers, so their start-up overlaps the first part.
 */
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const WORKERS = 4
const PER = 25
const LIMIT = 5
const WINDOW_MS = 2000
const started = Date.now()
const children = new Set()
const tempDirs = new Set()

function cleanup() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
  children.clear()
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true })
  tempDirs.clear()
}
process.on('exit', cleanup)
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    cleanup()
    process.exit(130)
  })
}

function fail(message) {
  console.error(`demo: ${message}`)
  process.exit(1)
}

// ---- Redis ----------------------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

function ping(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1')
    const done = (ok) => {
      sock.destroy()
      resolve(ok)
    }
    sock.setTimeout(300, () => done(false))
    sock.once('error', () => done(false))
    sock.once('connect', () => sock.write('PING\r\n'))
    sock.once('data', (d) => done(String(d).startsWith('+PONG')))
  })
}

/** Starts redis-server on `port` (a free one by default) and waits until it answers PING. */
async function spawnRedis(port, dir) {
  port ??= await freePort()
  dir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-demo-redis-'))
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
    { cwd: dir, stdio: 'ignore' },
  )
  children.add(child)
  child.once('exit', () => children.delete(child))
  tempDirs.add(dir)
  const deadline = Date.now() + 5000
  while (!(await ping(port))) {
    if (child.exitCode !== null || Date.now() > deadline) fail(`redis-server did not start on port ${port}`)
    await new Promise((r) => setTimeout(r, 20))
  }
  const version =
    /v=(\S+)/.exec(spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout)?.[1] ?? ''
  return {
    child,
    port,
    dir,
    url: `redis://127.0.0.1:${port}`,
    note: `spawned redis-server ${version} on 127.0.0.1:${port}`,
  }
}

let redisUrl = process.env.REDIS_URL
let note
const haveRedisServer = !spawnSync('redis-server', ['--version']).error
if (redisUrl) {
  note = `REDIS_URL=${redisUrl.replace(/\/\/[^@/]*@/, '//***@')}`
} else if (haveRedisServer) {
  ;({ url: redisUrl, note } = await spawnRedis())
} else {
  note =
    'no REDIS_URL and no redis-server on PATH: MemoryStore in ONE process (state cannot be shared across processes)'
}

// ---- workers --------------------------------------------------------------------------------------

const runId = `demo-${Date.now().toString(36)}` // fresh keys every run
const procs = redisUrl ? WORKERS : 1
const lanesPer = redisUrl ? 1 : WORKERS
const env = { ...process.env, DEMO_PREFIX: runId, DEMO_LANES: String(lanesPer) }
if (redisUrl) env.REDIS_URL = redisUrl
else delete env.REDIS_URL

const workers = []
for (let i = 0; i < procs; i++) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/demo-worker.mts'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  children.add(child)
  const w = { child, pending: undefined }
  child.on('message', (msg) => {
    if (w.pending) {
      const p = w.pending
      w.pending = undefined
      p(msg)
    }
  })
  child.once('exit', (code) => {
    children.delete(child)
    if (code && code !== 0) fail(`worker ${i + 1} exited with code ${code}`)
  })
  workers.push(w)
}
const next = (w) => new Promise((resolve) => (w.pending = resolve))

// The HTTP servers of parts 4 and 5 start now, so their start-up overlaps the first bursts.
const FRAMEWORKS = ['express', 'fastify', 'hono']
/** Starts scripts/demo-http-server.mts; resolves with its base URL once it listens. */
function startHttp(framework, role, url, prefix) {
  const env = { ...process.env, DEMO_FRAMEWORK: framework, DEMO_ROLE: role, DEMO_PREFIX: prefix }
  if (url) env.REDIS_URL = url
  else delete env.REDIS_URL
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/demo-http-server.mts'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  children.add(child)
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      children.delete(child)
      if (code && code !== 0) fail(`the ${framework} ${role} server exited with code ${code}`)
    })
    child.once('message', (msg) => resolve({ child, url: `http://127.0.0.1:${msg.port}` }))
  })
}
const burstServers = Promise.all(FRAMEWORKS.map((f) => startHttp(f, 'burst', redisUrl, `${runId}-${f}`)))
// The outage kills and restarts a redis-server: one of its own, never the Redis of the other parts.
const outage = haveRedisServer
  ? spawnRedis().then(async (redis) => ({
      redis,
      server: await startHttp('express', 'outage', redis.url, `${runId}-outage`),
    }))
  : undefined

const readyTimer = setTimeout(() => fail('workers and servers did not get ready within 30 s'), 30_000)
await Promise.all([...workers.map(next), burstServers, outage])
clearTimeout(readyTimer)

/** Releases every worker at the same wall-clock instant; resolves with one list of calls per lane. */
async function burst(kind, key, at) {
  const replies = workers.map(next)
  for (const w of workers) w.child.send({ type: 'burst', kind, key, at })
  return (await Promise.all(replies)).flatMap((r) => r.lanes)
}

// ---- output ---------------------------------------------------------------------------------------

const ms = (x) => `${Math.round(x).toLocaleString('en-US')} ms`
function show(lanes) {
  lanes.forEach((calls, i) => {
    const sorted = [...calls].sort((a, b) => a.t - b.t)
    const marks = sorted.map((c) => (c.ok ? '✔' : '✘')).join(' ')
    const ok = sorted.filter((c) => c.ok)
    const span = (xs) => {
      const [lo, hi] = [xs[0].t.toFixed(1), xs.at(-1).t.toFixed(1)]
      return lo === hi ? `${lo} ms` : `${lo}–${hi} ms`
    }
    const at = ok.length
      ? `✔ ×${ok.length} at ${span(ok)}`
      : `✘ ×${sorted.length} by ${sorted.at(-1).t.toFixed(1)} ms`
    console.log(`  worker ${i + 1}  ${marks}   ${at}`)
  })
  const all = lanes.flat()
  return { admitted: all.filter((c) => c.ok).length, total: all.length, refused: all.filter((c) => !c.ok) }
}

/** A start instant away from the end of an epoch-aligned 2 s window, so a burst sits in one window. */
function startAt(delay = 80) {
  let at = Date.now() + delay
  if (at % WINDOW_MS > WINDOW_MS - 600) at += WINDOW_MS - (at % WINDOW_MS) + 50
  return at
}

const where = redisUrl ? `${procs} processes` : `${lanesPer} in-process workers`
console.log(`Tollgate demo — ${note}`)
console.log(
  `${where}, each firing ${PER} concurrent consume('demo-user'); limit ${LIMIT} per 2 s (sliding-window)`,
)
console.log('')

let at = startAt()
const first = show(await burst('tollgate', 'demo-user', at))
const retries = first.refused.map((c) => c.retry)
console.log(
  `  → admitted ${first.admitted} of ${first.total} (limit ${LIMIT}); the refused were told to retry in ` +
    `${ms(Math.min(...retries))}–${ms(Math.max(...retries))}`,
)

// Wait until every refused call's retry time has passed, then fire the same burst again.
const retryAt = at + Math.max(...first.refused.map((c) => c.t + c.retry))
const left = retryAt - Date.now()
console.log('')
console.log(
  `Once the latest of those retry times has passed (${ms(left)} from this line), the same burst again:`,
)
at = Math.max(retryAt, Date.now() + 30)
const second = show(await burst('tollgate', 'demo-user', at))
console.log(
  `  → admitted ${second.admitted} of ${second.total}: the limiter admits again, as much as the sliding window` +
    ` has freed by then`,
)

console.log('')
console.log(
  `The same ${WORKERS} × ${PER} burst against a naive limiter (GET the count; INCR it if below ${LIMIT}):`,
)
const naive = show(await burst('naive', `${runId}:naive`, startAt()))
const over = naive.admitted > LIMIT ? `, ${(naive.admitted / LIMIT).toFixed(0)}× over the limit` : ''
console.log(
  `  → admitted ${naive.admitted} of ${naive.total} (limit ${LIMIT})${over}: GET and INCR are two round trips,` +
    " and the other calls' GETs land in between",
)

for (const w of workers) w.child.send({ type: 'exit' })
await Promise.all(
  workers.map((w) => new Promise((r) => (w.child.exitCode !== null ? r() : w.child.once('exit', r)))),
)

// ---- 4. HTTP: one burst per framework ---------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const now = () => performance.now()

/** One request; never rejects (a network error is status 0). */
async function request(url, method = 'GET') {
  const sent = now()
  try {
    const res = await fetch(url, { method })
    await res.arrayBuffer()
    return { status: res.status, headers: res.headers, sent, ms: now() - sent }
  } catch (error) {
    return { status: 0, headers: new Headers(), sent, ms: now() - sent, error }
  }
}
const SHOWN = ['RateLimit', 'RateLimit-Policy', 'Retry-After']
const headerLines = (res) => SHOWN.filter((h) => res.headers.has(h)).map((h) => `${h}: ${res.headers.get(h)}`)

const servers = await burstServers
const storeNote = redisUrl ? 'one Redis' : 'a MemoryStore each'
console.log('')
console.log(
  `HTTP: Express, Fastify and Hono servers (${storeNote}); 8 requests back to back to GET /burst,\n` +
    `limited to ${LIMIT} per minute per client IP:`,
)
const bursts = []
for (let i = 0; i < FRAMEWORKS.length; i++) {
  const replies = []
  for (let n = 0; n < 8; n++) replies.push(await request(`${servers[i].url}/burst`))
  bursts.push(replies)
  console.log(`  ${FRAMEWORKS[i].padEnd(8)} ${replies.map((r) => r.status).join(' ')}`)
}
// The last allowed and the first refused response of each, as header lines.
const picked = bursts.map((replies) => {
  const lastOk = replies.findLast((r) => r.status === 200)
  const firstRefused = replies.find((r) => r.status === 429)
  if (!lastOk || !firstRefused) fail(`a burst was not ${LIMIT} admitted then refused`)
  return [headerLines(lastOk), headerLines(firstRefused)]
})
const same = picked.every((p) => JSON.stringify(p) === JSON.stringify(picked[0]))
for (let i = 0; i < (same ? 1 : FRAMEWORKS.length); i++) {
  const [ok, refused] = picked[i]
  console.log(same ? '  headers, byte for byte the same from all three:' : `  headers from ${FRAMEWORKS[i]}:`)
  console.log(`    last 200   ${ok.join('\n               ')}`)
  console.log(`    first 429  ${refused.join('\n               ')}`)
}
console.log(
  '  (t can exceed w: a sliding window forgets a request only when both the current and the previous\n' +
    '   window have passed, so t is when the whole quota is back, up to 2 × w; Retry-After is when one more\n' +
    '   request gets in)',
)

// ---- 5. an outage -----------------------------------------------------------------------------------

const TICK_MS = 100
if (!outage) {
  console.log('')
  console.log('Outage: skipped (it needs a redis-server on PATH, to stop and restart)')
} else {
  const { redis, server } = await outage
  const login = `${server.url}/login`
  const api = `${server.url}/api`
  // One mark per response: decided by Redis (with RateLimit headers), or by the failure policy.
  const mark = (r) =>
    r.status === 200
      ? r.headers.has('RateLimit')
        ? '✔'
        : '○'
      : r.status === 503
        ? '⊘'
        : r.status === 429
          ? '✘'
          : `[${r.status}]`
  const fromRedis = (r) => (r.status === 200 || r.status === 429) && r.headers.has('RateLimit')
  const ticks = [] // { phase, login: Promise, api: Promise }
  const tick = (phase) => ticks.push({ phase, login: request(login, 'POST'), api: request(api), at: now() })

  console.log('')
  console.log(
    "Outage: Express on a redis-server of its own; POST /login 5/min with onStoreError: 'deny',\n" +
      "GET /api 100/min with 'allow';",
  )
  console.log('one request to each every 100 ms while that redis-server is killed (│) and restarted (│):')
  for (let i = 0; i < 4; i++, await sleep(TICK_MS)) tick('up')
  redis.child.kill('SIGKILL')
  const killedAt = now()
  for (let i = 0; i < 12; i++, await sleep(TICK_MS)) tick('down')
  const restarted = await spawnRedis(redis.port, redis.dir)
  const backAt = now()
  // Until both routes are answered from Redis again (each route stops once it is).
  let loginBack
  let apiBack
  while (!(loginBack && apiBack)) {
    if (now() - backAt > 10_000) fail('the server did not recover within 10 s of redis-server restarting')
    const t = { phase: 'back', at: now() }
    if (!loginBack) t.login = request(login, 'POST')
    if (!apiBack) t.api = request(api)
    ticks.push(t)
    const [l, a] = await Promise.all([t.login, t.api])
    if (l && fromRedis(l)) loginBack = l
    if (a && fromRedis(a)) apiBack = a
    await sleep(TICK_MS)
  }
  const settled = await Promise.all(
    ticks.map(async (t) => ({ ...t, login: await t.login, api: await t.api })),
  )
  const row = (route) =>
    ['up', 'down', 'back']
      .map((phase) =>
        settled
          .filter((t) => t.phase === phase && t[route])
          .map((t) => mark(t[route]))
          .join(' '),
      )
      .join(' │ ')
  console.log(`  POST /login  ${row('login')}`)
  console.log(`  GET  /api    ${row('api')}`)
  console.log('  (✔ 200 with RateLimit headers, ○ 200 without: admitted by the failure policy, ⊘ 503, ✘ 429)')
  const down = settled.filter((t) => t.phase === 'down')
  const first503 = down.find((t) => t.login.status === 503)?.login
  const slow = down.filter((t) => t.login.ms > 100).length
  if (first503) {
    console.log(
      `  each 503: ${first503.headers.get('Content-Type')}, Retry-After: ${first503.headers.get('Retry-After')};` +
        (slow === 0
          ? ` all ${down.length} requests while down were answered at once\n  (client reconnecting, or the breaker open),` +
            ' none waited for the 500 ms store deadline'
          : ` ${slow} of the ${down.length} requests while down waited for the 500 ms\n  store deadline;` +
            ` the other ${down.length - slow} were answered at once (client reconnecting, or the breaker open)`),
    )
  }
  const recovery = (r) => ms(r.sent + r.ms - backAt)
  console.log(
    `  down ${ms(backAt - killedAt)}; answered from Redis again ${recovery(loginBack)} (login)` +
      ` and ${recovery(apiBack)} (api) after the restart`,
  )
  const after = []
  for (let n = 0; n < 8; n++) after.push(await request(login, 'POST'))
  if (!after.some((r) => r.status === 429)) fail('the limit was not enforced after recovery')
  const spent = 5 - after.filter((r) => r.status === 200).length
  console.log(`  then 8 × POST /login: ${after.map(mark).join(' ')}`)
  // Redis restarted empty: whatever was spent was spent after the restart. The request that saw it
  // back (the last of the row above) spent 1 if it was admitted.
  const probe = loginBack.status === 200 ? 1 : 0
  const refused = down.filter((t) => t.login.status === 503).length
  if (spent > probe) {
    fail(
      `Redis came back empty, yet ${spent} logins were spent before these 8: a request answered 503 ` +
        'while it was down was charged on reconnect, which docs/failure-modes.md says never happens',
    )
  }
  console.log(
    `  limit 5 enforced; Redis came back empty and none of the ${refused} logins answered 503 while it` +
      `\n  was down was charged on reconnect (${spent} spent, by the request that saw it back)`,
  )
  children.add(restarted.child)
}

for (const s of [...servers, ...(outage ? [(await outage).server] : [])]) s.child.send({ type: 'exit' })
await sleep(50)
console.log('')
console.log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
cleanup()
process.exit(0)
