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
 * 3. the same burst against a naive GET-then-INCR limiter over-admits.
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

async function spawnRedis() {
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-demo-redis-'))
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
    { cwd: dir, stdio: 'ignore' },
  )
  children.add(child)
  tempDirs.add(dir)
  const deadline = Date.now() + 5000
  while (!(await ping(port))) {
    if (child.exitCode !== null || Date.now() > deadline) fail(`redis-server did not start on port ${port}`)
    await new Promise((r) => setTimeout(r, 20))
  }
  const version =
    /v=(\S+)/.exec(spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout)?.[1] ?? ''
  return { url: `redis://127.0.0.1:${port}`, note: `spawned redis-server ${version} on 127.0.0.1:${port}` }
}

let redisUrl = process.env.REDIS_URL
let note
if (redisUrl) {
  note = `REDIS_URL=${redisUrl.replace(/\/\/[^@/]*@/, '//***@')}`
} else if (!spawnSync('redis-server', ['--version']).error) {
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
const readyTimer = setTimeout(() => fail('workers did not get ready within 12 s'), 12_000)
await Promise.all(workers.map(next))
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
const waited = retryAt - Date.now()
console.log('')
console.log(`After waiting ${ms(waited)} (until the refused decisions' retryAfterMs), the same burst again:`)
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
console.log('')
console.log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
cleanup()
