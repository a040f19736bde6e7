/**
 * `tollgate dashboard`: a small web page over the same reads as the commands (node:http, no framework,
 * one static page shipped in the package). JSON endpoints: the policies of the prefix, the top refused
 * identities, one identity's state, the reset of one identity, the live blocks with block and unblock, and
 * decisions per second from `--metrics`.
 * Bound to anything but loopback it needs `--token`, checked on every request in constant time.
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import http from 'node:http'
import path from 'node:path'
import { InputError, parseKey, type RateLimiter } from '@tollgate/core'
import { checkIdentity, checkReason, controlLimiter, listBlocks, parseFor, unblock } from './blocks'
import { type Connection, connect } from './connect'
import { RateSampler } from './dashboard-rates'
import { CliError, type Io } from './errors'
import { parseHumanDuration } from './format'
import { inspect, reset, type Target } from './identity'
import { limiterOf, shownLimits } from './override'
import { type TopFlags, type TopOptions, topJson, topOptions } from './top'
import { readTop, topSets } from './top-read'

export interface DashboardFlags extends TopFlags {
  port?: string
  host?: string
  token?: string
  metrics?: string
}

export interface Dashboard {
  url: string
  close(): Promise<void>
}

/** The page shipped in the package, beside src/ and dist/ alike (the CommonJS build has no import.meta.url). */
function pagePath(): string | URL {
  return typeof __dirname === 'string'
    ? path.join(__dirname, '..', 'static', 'dashboard.html')
    : new URL('../static/dashboard.html', import.meta.url)
}
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/
/** Keys a policy listing reads at most per primary: a census of a large prefix is not the question. */
const POLICY_SCAN_KEYS = 10_000
const MAX_BODY = 4096

/** Checks the flags and connects; resolves once the server listens. */
export async function startDashboard(values: DashboardFlags, io: Io): Promise<Dashboard> {
  const port = values.port === undefined ? 9464 : Number(values.port)
  if (!/^\d+$/.test(values.port ?? '9464') || port > 65535)
    throw new CliError(`--port ${values.port}: expected a port number from 0 to 65535`, 2)
  const host = values.host ?? '127.0.0.1'
  if (!LOOPBACK.test(host) && !values.token)
    throw new CliError(
      `--host ${host} is not loopback: give --token <secret> (every request must carry it), or bind 127.0.0.1`,
      2,
    )
  if (values.token !== undefined && values.token.length < 16)
    throw new CliError(`--token: at least 16 characters (given: ${values.token.length})`, 2)
  if (values.metrics !== undefined) {
    try {
      new URL(values.metrics)
    } catch {
      throw new CliError(`--metrics '${values.metrics}' is not a URL`, 2)
    }
  }
  const interval = values.interval === undefined ? 2000 : parseHumanDuration(values.interval)
  if (interval === undefined || interval < 100)
    throw new CliError(`--interval ${values.interval}: expected a duration of at least 100ms, e.g. 2s`, 2)
  const options = await topOptions({ ...values, limit: undefined })
  const page = await readFile(pagePath(), 'utf8')
  const redis = await connect(values)
  const sampler = new RateSampler(values.metrics, interval)
  const limiter = await controlLimiter(redis, options.prefix)
  const server = http.createServer((req, res) => {
    handle(req, res, { redis, options, sampler, page, token: values.token, limiter }).catch((error) => {
      const e = error as { exitCode?: number; message?: string }
      const usage = (e instanceof CliError && e.exitCode === 2) || e instanceof InputError
      send(res, usage ? 400 : 502, { error: e.message ?? String(error) })
    })
  })
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, host, () => resolve())
    })
  } catch (error) {
    await redis.close()
    const e = error as { code?: string; message?: string }
    throw new CliError(`cannot listen on ${host}:${port}: ${e.code ?? e.message}`)
  }
  sampler.start()
  const address = server.address() as { port: number }
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}/`
  io.out(
    `tollgate dashboard on ${url} (prefix '${options.prefix}'${values.metrics ? `, metrics ${values.metrics}` : ''})`,
  )
  return {
    url,
    close: async () => {
      sampler.stop()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
      await redis.close()
    },
  }
}

/** `tollgate dashboard`: serves until interrupted; resolves to the exit code. */
export async function dashboard(values: DashboardFlags, io: Io): Promise<number> {
  const running = await startDashboard(values, io)
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  await running.close()
  return 0
}

interface Context {
  redis: Connection
  options: TopOptions
  sampler: RateSampler
  page: string
  token: string | undefined
  /** For block and allow entries only (controlLimiter). */
  limiter: RateLimiter
}

/** Constant-time: both sides hashed to the same length first. */
function tokenMatches(given: string, token: string): boolean {
  const a = createHash('sha256').update(given).digest()
  const b = createHash('sha256').update(token).digest()
  return timingSafeEqual(a, b)
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
  res.end(JSON.stringify(body))
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse, ctx: Context): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://dashboard')
  if (ctx.token !== undefined) {
    const header = req.headers.authorization
    const given = header?.startsWith('Bearer ') ? header.slice(7) : (url.searchParams.get('token') ?? '')
    if (!tokenMatches(given, ctx.token)) return send(res, 401, { error: 'a valid token is required' })
  }
  // Without a token only loopback can reach it, but a web page the user visits could still call it: a
  // Host that is not loopback (DNS rebinding) or a cross-origin POST is refused.
  const host = (req.headers.host ?? '').replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1')
  if (ctx.token === undefined && !LOOPBACK.test(host))
    return send(res, 403, { error: `host '${host}' is not loopback: start with --token to serve it` })
  const route = `${req.method} ${url.pathname}`
  if (req.method === 'POST') {
    const origin = req.headers.origin
    if (origin !== undefined && !sameHost(origin, req.headers.host))
      return send(res, 403, { error: 'a POST from another origin' })
    if (!req.headers['content-type']?.startsWith('application/json'))
      return send(res, 415, { error: 'content-type: application/json' })
  }
  switch (route) {
    case 'GET /':
      res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        'content-security-policy':
          "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
      })
      return void res.end(ctx.page)
    case 'GET /api/policies':
      return send(res, 200, { prefix: ctx.options.prefix, policies: await policies(ctx) })
    case 'GET /api/top': {
      const limit = Number(url.searchParams.get('limit') ?? '20')
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000)
        return send(res, 400, { error: 'limit: an integer from 1 to 1000' })
      const policy = url.searchParams.get('policy')
      const rows = await readTop(ctx.redis, {
        prefix: ctx.options.prefix,
        limit,
        policies: policy ? [policy] : ctx.options.policies,
        description: ctx.options.description,
        secret: ctx.options.secret,
      })
      return send(res, 200, { prefix: ctx.options.prefix, top: rows.map(topJson) })
    }
    case 'GET /api/identity': {
      const identity = url.searchParams.get('identity')
      if (!identity) return send(res, 400, { error: 'identity: give ?identity=<identity>' })
      return send(res, 200, await capture((io) => inspect(target(ctx, identity), true, io)))
    }
    case 'POST /api/reset': {
      const body = await readBody(req)
      const identity = (body as { identity?: unknown } | undefined)?.identity
      if (typeof identity !== 'string' || identity === '')
        return send(res, 400, { error: 'identity: send {"identity": "<identity>"}' })
      return send(res, 200, await capture((io) => reset(target(ctx, identity), true, io)))
    }
    case 'GET /api/blocks': {
      const limit = Number(url.searchParams.get('limit') ?? '100')
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000)
        return send(res, 400, { error: 'limit: an integer from 1 to 1000' })
      return send(res, 200, { prefix: ctx.options.prefix, blocks: await listBlocks(ctx.limiter, limit) })
    }
    case 'POST /api/block': {
      const body = (await readBody(req)) as
        | { identity?: unknown; for?: unknown; reason?: unknown }
        | undefined
      const identity = checkIdentity(field(body?.identity, 'identity'), 'identity')
      const forMs = parseFor(field(body?.for, 'for'), 'for')
      const reason = checkReason(field(body?.reason, 'reason'), 'reason')
      await ctx.limiter.block(identity, { for: forMs, reason })
      return send(res, 200, { prefix: ctx.options.prefix, identity, blocked: true, forMs, reason })
    }
    case 'POST /api/unblock': {
      const body = (await readBody(req)) as { identity?: unknown } | undefined
      const identity = checkIdentity(field(body?.identity, 'identity'), 'identity')
      const wasBlocked = await unblock(ctx.limiter, identity)
      return send(res, 200, {
        prefix: ctx.options.prefix,
        identity,
        blocked: false,
        ...(wasBlocked === undefined ? {} : { wasBlocked }),
      })
    }
    case 'GET /api/overrides': {
      const limit = Number(url.searchParams.get('limit') ?? '100')
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000)
        return send(res, 400, { error: 'limit: an integer from 1 to 1000' })
      const listed = await ctx.limiter.overrides.list({ limit })
      const overrides = listed.map((o) => ({
        identity: o.identity,
        limits: o.limits,
        shown: shownLimits(o.limits),
        expiresInMs: Number.isFinite(o.expiresInMs) ? o.expiresInMs : null,
      }))
      return send(res, 200, {
        prefix: ctx.options.prefix,
        settable: ctx.options.description !== undefined,
        overrides,
      })
    }
    case 'POST /api/override': {
      const body = (await readBody(req)) as
        | { identity?: unknown; policy?: unknown; limit?: unknown; ttl?: unknown; billingDay?: unknown }
        | undefined
      const identity = checkIdentity(field(body?.identity, 'identity'), 'identity')
      const description = ctx.options.description
      if (description === undefined)
        throw new CliError(
          'overrides: start the dashboard with --config or --policy (windows included) to set them',
          2,
        )
      const { limit, billingDay } = body ?? {}
      const integer = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v)
      if (limit !== undefined && !integer(limit)) throw new CliError('limit: expected an integer', 2)
      if (billingDay !== undefined && !integer(billingDay))
        throw new CliError('billingDay: expected an integer from 1 to 31', 2)
      if (limit === undefined && billingDay === undefined)
        throw new CliError('limit: expected an integer (or a billingDay)', 2)
      const policy = field(body?.policy, 'policy')
      const ttl = field(body?.ttl, 'ttl')
      const ttlMs = ttl === undefined || ttl === '' ? undefined : parseFor(ttl, 'ttl')
      const single = description.policies.length === 1 && description.policies[0]!.name === undefined
      if (!single && !policy) throw new CliError('policy: name the policy to override', 2)
      // the limiter the description makes checks the limit as the app's would (InputError: a 400)
      const limiter = await limiterOf(ctx.redis, ctx.options.prefix, description)
      // as overrides.set takes one policy's: a limit, a calendar month's billing day, or both
      const one = { ...(limit !== undefined && { limit }), ...(billingDay !== undefined && { billingDay }) }
      const limits = (single ? one : { [policy!]: one }) as Parameters<typeof limiter.overrides.set>[1]
      await limiter.overrides.set(identity, limits, ttlMs === undefined ? undefined : { ttl: ttlMs })
      return send(res, 200, { prefix: ctx.options.prefix, identity, limits })
    }
    case 'POST /api/unoverride': {
      const body = (await readBody(req)) as { identity?: unknown } | undefined
      const identity = checkIdentity(field(body?.identity, 'identity'), 'identity')
      await ctx.limiter.overrides.delete(identity)
      return send(res, 200, { prefix: ctx.options.prefix, identity, removed: true })
    }
    case 'GET /api/rates':
      return send(res, 200, ctx.sampler.answer())
    default:
      return send(res, 404, { error: `no route ${route}` })
  }
}

/** Whether an Origin names this Host; an opaque origin (`null`, a sandboxed frame) never does. */
function sameHost(origin: string, host: string | undefined): boolean {
  try {
    return new URL(origin).host === host
  } catch {
    return false
  }
}

/** A JSON body's field: a string or absent, else a usage error naming it. */
function field(value: unknown, name: string): string | undefined {
  if (value === undefined || value === null || typeof value === 'string') return value ?? undefined
  throw new CliError(`${name}: expected a string`, 2)
}

function target(ctx: Context, identity: string): Target {
  const { prefix, description, secret } = ctx.options
  return { redis: ctx.redis, description, args: [identity], prefix, secret }
}

/** A command's one JSON document, with its warnings. */
async function capture(command: (io: Io) => Promise<number>): Promise<unknown> {
  let out = ''
  const warnings: string[] = []
  await command({ out: (line) => (out += line), err: (line) => warnings.push(line) })
  return { ...(JSON.parse(out) as object), warnings }
}

async function readBody(req: http.IncomingMessage): Promise<unknown> {
  let body = ''
  for await (const chunk of req) {
    body += chunk
    if (body.length > MAX_BODY) throw new CliError('body: too large', 2)
  }
  try {
    return JSON.parse(body)
  } catch {
    throw new CliError('body: expected JSON', 2)
  }
}

/** The policies under the prefix: from its keys (bounded SCAN per primary) and its top sets. */
async function policies(ctx: Context) {
  const found = new Map<string, { policy: string; algorithm?: string; windowMs: number; limit?: number }>()
  const match = `${ctx.options.prefix.replace(/[*?[\]\\]/g, '\\$&')}:*`
  for (const node of await ctx.redis.masters()) {
    let cursor = '0'
    let seen = 0
    do {
      const reply = await node.scan(cursor, { MATCH: match, COUNT: 1000 })
      for (const key of reply.keys) {
        const p = parseKey(String(key))
        if (!p) continue
        const policy = p.policy ?? 'default'
        found.set(`${policy}\n${p.windowMs}`, { policy, algorithm: p.algorithm, windowMs: p.windowMs })
      }
      seen += reply.keys.length
      cursor = String(reply.cursor)
    } while (cursor !== '0' && seen < POLICY_SCAN_KEYS)
  }
  for (const { policy, windowMs } of (await topSets(ctx.redis, ctx.options.prefix)).values()) {
    const same = [...found.values()].some((p) => p.policy === policy)
    if (!same) found.set(`${policy}\n${windowMs}`, { policy, windowMs })
  }
  for (const p of found.values()) {
    const d = ctx.options.description?.policies.find((x) => (x.name ?? 'default') === p.policy)
    if (d) p.limit = d.limit
  }
  return [...found.values()].sort((a, b) => (a.policy < b.policy ? -1 : a.policy > b.policy ? 1 : 0))
}
