/**
 * The `tollgate` command: `inspect` an identity (remaining and reset per policy, without spending),
 * `reset` one identity, `watch` a limiter's refusals live from a Prometheus `/metrics` endpoint. Against
 * one Redis (`--url`) or a Redis Cluster (`--cluster`), with the limiter described by flags or loaded
 * from a config module. See docs/observability.md#the-command-line.
 * @module
 */
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import {
  type Decision,
  type KeyInput,
  type PolicyOptions,
  RateLimiter,
  type RateLimiterOptions,
  RedisStore,
} from '@tollgate/core'
import { createClient, createCluster } from 'redis'

/** Where the command writes. */
export interface Io {
  out(line: string): void
  err(line: string): void
}

/** A usage or environment error: printed as one line, exit code 2 (usage) or 1 (environment). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message)
  }
}

export const HELP = `Usage: tollgate [options] <command>

Commands:
  inspect <identity>        remaining and reset time per policy, without spending
  inspect <policy>=<identity> ...   one identity per policy (multi-policy limiters)
  reset <identity>          forget the state of one identity (every policy)
  watch                     refusals per limiter and policy, live, from a /metrics endpoint

Redis:
  --url <redis://host:port> Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379)
  --cluster                 the URL is a node of a Redis Cluster (seed node)

Limiter (or --config):
  --config <module>         a module whose default export (or 'limiter') is a RateLimiter or its
                            options without 'store' ({ prefix, policies } or { prefix, limit, window })
  --prefix <prefix>         key prefix (default 'tollgate')
  --limit <n> --window <w> [--algorithm <a>] [--burst <n>]    one policy ('default')
  --policy <name>=<limit>/<window>[/<algorithm>]              a named policy (repeatable)

Watch:
  --metrics <url>           the Prometheus endpoint of an app using @tollgate/prometheus
  --limiter <name>          only this limiter
  --interval <duration>     between samples (default 1s)
  --count <n>               stop after n samples (default: until interrupted)

Other:
  --json                    machine-readable output
  --help                    this text`

const OPTIONS = {
  url: { type: 'string' },
  cluster: { type: 'boolean' },
  config: { type: 'string' },
  prefix: { type: 'string' },
  limit: { type: 'string' },
  window: { type: 'string' },
  algorithm: { type: 'string' },
  burst: { type: 'string' },
  policy: { type: 'string', multiple: true },
  metrics: { type: 'string' },
  limiter: { type: 'string' },
  interval: { type: 'string' },
  count: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

type Flags = ReturnType<typeof parse>['values']

function parse(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    throw new CliError(`${(error as Error).message}\n(see tollgate --help)`, 2)
  }
}

/**
 * Runs the command line; resolves to the exit code.
 *
 * @example
 * process.exitCode = await run(process.argv.slice(2))
 */
export async function run(argv: string[], io: Io = consoleIo): Promise<number> {
  try {
    const { values, positionals } = parse(argv)
    const [command, ...args] = positionals
    if (values.help || command === undefined || command === 'help') {
      io.out(HELP)
      return command === undefined && !values.help ? 2 : 0
    }
    if (command === 'watch') return await watch(values, io)
    if (command !== 'inspect' && command !== 'reset') {
      throw new CliError(`unknown command '${command}' (inspect, reset, watch; see tollgate --help)`, 2)
    }
    if (args.length === 0)
      throw new CliError(`${command}: give an identity, e.g. tollgate ${command} user:42`, 2)
    const options = await limiterOptions(values)
    const redis = await connect(values)
    try {
      const limiter = new RateLimiter({ ...options, store: new RedisStore(redis.client), timeoutMs: 5000 })
      await requireKnownPrefix(redis, limiter.prefix)
      const key = keyOf(args, limiter)
      if (command === 'inspect') {
        const decision = await limiter.peek(key, { onStoreError: 'deny' })
        if (decision.source !== 'store') throw new CliError(`Redis did not answer (${redis.url})`)
        printInspect(decision, limiter, values.json === true, io)
      } else {
        await limiter.reset(key)
        io.out(
          values.json
            ? JSON.stringify({ reset: true, keys: limiter.keysFor(key) })
            : `reset ${limiter.keysFor(key).join(', ')}`,
        )
      }
      return 0
    } finally {
      await redis.close()
    }
  } catch (error) {
    if (error instanceof CliError) {
      io.err(`tollgate: ${error.message}`)
      return error.exitCode
    }
    const e = error as { code?: string; message?: string }
    io.err(`tollgate: ${e.code ? `${e.code}: ` : ''}${e.message ?? String(error)}`)
    return 1
  }
}

const consoleIo: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
}

/** The limiter options from --config or the flags (without a store). */
async function limiterOptions(values: Flags): Promise<Omit<RateLimiterOptions, 'store'>> {
  if (values.config !== undefined) {
    if (values.limit || values.window || values.policy) {
      throw new CliError('--config cannot be combined with --limit/--window/--policy', 2)
    }
    let mod: Record<string, unknown>
    try {
      mod = await import(pathToFileURL(values.config).href)
    } catch (error) {
      throw new CliError(`--config ${values.config}: cannot load it (${(error as Error).message})`, 2)
    }
    const exported = (mod.limiter ?? mod.default) as unknown
    // instanceof recognises a limiter of either build (ESM, CommonJS) or copy of @tollgate/core
    if (exported instanceof RateLimiter) {
      const l = exported as RateLimiter
      const policies: Record<string, PolicyOptions> = {}
      for (const p of l.policies) {
        policies[p.name] = {
          limit: p.limit,
          window: p.windowMs,
          algorithm: p.algorithm,
          ...(p.burst !== p.limit ? { burst: p.burst } : {}),
        }
      }
      const single = l.policies.length === 1 && l.policies[0].name === 'default'
      return single
        ? { prefix: values.prefix ?? l.prefix, ...policies.default }
        : { prefix: values.prefix ?? l.prefix, policies }
    }
    if (!exported || typeof exported !== 'object') {
      throw new CliError(
        `--config ${values.config}: export a RateLimiter or its options (default or 'limiter')`,
        2,
      )
    }
    const { store: _store, ...rest } = exported as RateLimiterOptions
    return values.prefix ? { ...rest, prefix: values.prefix } : rest
  }
  const prefix = values.prefix
  if (values.policy?.length) {
    if (values.limit || values.window) throw new CliError('use --policy or --limit/--window, not both', 2)
    const policies: Record<string, PolicyOptions> = {}
    for (const spec of values.policy) {
      const m = /^([^=]+)=(\d+)\/([^/]+)(?:\/(.+))?$/.exec(spec)
      if (!m) throw new CliError(`--policy ${spec}: expected <name>=<limit>/<window>[/<algorithm>]`, 2)
      policies[m[1]] = {
        limit: Number(m[2]),
        window: duration(m[3]),
        ...(m[4] ? { algorithm: m[4] as PolicyOptions['algorithm'] } : {}),
      }
    }
    return { prefix, policies }
  }
  if (!values.limit || !values.window) {
    throw new CliError('describe the limiter: --limit and --window, --policy, or --config (see --help)', 2)
  }
  return {
    prefix,
    limit: Number(values.limit),
    window: duration(values.window),
    ...(values.algorithm ? { algorithm: values.algorithm as PolicyOptions['algorithm'] } : {}),
    ...(values.burst ? { burst: Number(values.burst) } : {}),
  }
}

function duration(text: string): PolicyOptions['window'] {
  return (/^\d+$/.test(text) ? Number(text) : text) as PolicyOptions['window']
}

interface Connection {
  url: string
  client: any
  /** Every primary, to SCAN. */
  masters(): Array<{ scan(cursor: string, options: object): Promise<{ cursor: string; keys: string[] }> }>
  close(): Promise<void>
}

const CONNECT_TIMEOUT_MS = 3000

/** Connects after checking the URL, and that --cluster matches what the server is. */
async function connect(values: Flags): Promise<Connection> {
  const url = values.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new CliError(`--url '${url}' is not a URL: expected redis://host:port (or rediss://)`, 2)
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new CliError(
      `--url '${url}': expected the redis:// or rediss:// scheme, got '${parsed.protocol}'`,
      2,
    )
  }
  if (!parsed.hostname) throw new CliError(`--url '${url}': no host`, 2)
  const socket = { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: false as const }
  // Ask the node what it is first, so a cluster node given without --cluster (or the reverse) is a
  // clear error rather than MOVED replies or a cluster client that never converges.
  const probe = createClient({ url, socket })
  probe.on('error', () => {})
  try {
    await probe.connect()
  } catch (error) {
    const e = error as { code?: string; message?: string }
    throw new CliError(`cannot connect to ${url}: ${e.code ?? e.message ?? error}`)
  }
  let clusterEnabled: boolean
  try {
    const info = String(await probe.sendCommand(['INFO', 'cluster']))
    clusterEnabled = /cluster_enabled:1/.test(info)
  } finally {
    probe.destroy()
  }
  if (clusterEnabled && !values.cluster) {
    throw new CliError(
      `${url} is a node of a Redis Cluster: add --cluster (a single-node client would only get MOVED replies)`,
      2,
    )
  }
  if (!clusterEnabled && values.cluster) {
    throw new CliError(`${url} is not a cluster node (cluster_enabled:0): drop --cluster`, 2)
  }
  if (values.cluster) {
    const cluster = createCluster({ rootNodes: [{ url, socket }], defaults: { socket } })
    cluster.on('error', () => {})
    await cluster.connect()
    return {
      url,
      client: cluster,
      masters: () => cluster.masters.map((m) => cluster.nodeClient(m) as any),
      close: async () => {
        cluster.destroy()
      },
    }
  }
  const client = createClient({ url, socket })
  client.on('error', () => {})
  await client.connect()
  return { url, client, masters: () => [client as any], close: async () => client.destroy() }
}

/** A prefix with no key anywhere is almost always a typo: say so instead of printing a full quota. */
async function requireKnownPrefix(redis: Connection, prefix: string): Promise<void> {
  for (const node of await Promise.all(redis.masters())) {
    let cursor = '0'
    let scanned = 0
    do {
      const reply = await node.scan(cursor, { MATCH: `${prefix}:*`, COUNT: 1000 })
      if (reply.keys.length > 0) return
      cursor = String(reply.cursor)
      scanned++
    } while (cursor !== '0' && scanned < 1000)
  }
  throw new CliError(
    `unknown prefix '${prefix}': no key matches '${prefix}:*' on ${redis.url}. Check --prefix (or the config's prefix).`,
  )
}

/** `user:42` for every policy, or `ip=ip:1.2.3.4 account=email:a@b` per policy. */
function keyOf(args: string[], limiter: RateLimiter): KeyInput {
  const names = new Set(limiter.policies.map((p) => p.name))
  const perPolicy = args.every((a) => {
    const i = a.indexOf('=')
    return i > 0 && names.has(a.slice(0, i))
  })
  if (perPolicy && (args.length > 1 || names.size > 1)) {
    return Object.fromEntries(args.map((a) => [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]))
  }
  if (args.length > 1)
    throw new CliError(`one identity, or <policy>=<identity> per policy (${[...names].join(', ')})`, 2)
  return args[0]
}

function printInspect(decision: Decision, limiter: RateLimiter, json: boolean, io: Io): void {
  const rows = decision.policies.map((p, i) => ({
    policy: p.policy,
    algorithm: p.algorithm,
    key: limiter.keysFor(keyFromDecision(decision))[i],
    limit: p.limit,
    remaining: p.remaining,
    resetMs: p.resetMs,
    retryAfterMs: p.allowed ? 0 : Number.isFinite(p.retryAfterMs) ? p.retryAfterMs : -1,
  }))
  if (json) {
    io.out(JSON.stringify({ allowed: decision.allowed, policies: rows }))
    return
  }
  io.out(`policy\talgorithm\tremaining/limit\treset in\tretry after\tkey`)
  for (const r of rows) {
    io.out(
      `${r.policy}\t${r.algorithm}\t${r.remaining}/${r.limit}\t${ms(r.resetMs)}\t${r.retryAfterMs ? ms(r.retryAfterMs) : '-'}\t${r.key}`,
    )
  }
}

function keyFromDecision(decision: Decision): KeyInput {
  return Object.fromEntries(decision.policies.map((p) => [p.policy, p.key]))
}

function ms(value: number): string {
  if (value < 0) return 'never'
  return value >= 1000 ? `${(value / 1000).toFixed(1)}s` : `${value}ms`
}

/** Polls a /metrics endpoint and prints refusals per limiter and policy for each interval. */
async function watch(values: Flags, io: Io): Promise<number> {
  const url = values.metrics
  if (!url)
    throw new CliError('watch: give --metrics <url> (an endpoint serving @tollgate/prometheus metrics)', 2)
  try {
    new URL(url)
  } catch {
    throw new CliError(`--metrics '${url}' is not a URL`, 2)
  }
  const interval = values.interval ? intervalMs(values.interval) : 1000
  const count = values.count === undefined ? Number.POSITIVE_INFINITY : Number(values.count)
  if (!(count >= 1)) throw new CliError(`--count ${values.count}: expected a positive integer`, 2)
  let previous = await scrape(url, values.limiter)
  for (let i = 0; i < count; i++) {
    await new Promise((r) => setTimeout(r, interval))
    const current = await scrape(url, values.limiter)
    const at = new Date().toISOString()
    for (const [series, now] of current) {
      const delta = now - (previous.get(series) ?? 0)
      const [limiter, policy, outcome] = series.split('\n')
      if (outcome === 'allowed') continue
      if (values.json)
        io.out(JSON.stringify({ at, limiter, policy, outcome, count: delta, intervalMs: interval }))
      else if (delta > 0) io.out(`${at}\t${limiter}\t${policy}\t${outcome}\t${delta}`)
    }
    previous = current
  }
  return 0
}

function intervalMs(text: string): number {
  const m = /^(\d+)(ms|s|m)?$/.exec(text)
  if (!m) throw new CliError(`--interval ${text}: expected e.g. 500ms, 1s, 1m`, 2)
  return Number(m[1]) * (m[2] === 'm' ? 60_000 : m[2] === 's' || m[2] === undefined ? 1000 : 1)
}

const SAMPLE = /^(\w*decisions_total)\{([^}]*)\} ([0-9.eE+-]+)$/

/** `limiter\npolicy\noutcome` -> count, summed over sources. */
async function scrape(url: string, only: string | undefined): Promise<Map<string, number>> {
  let text: string
  try {
    const res = await fetch(url)
    if (!res.ok) throw new CliError(`--metrics ${url}: HTTP ${res.status}`)
    text = await res.text()
  } catch (error) {
    if (error instanceof CliError) throw error
    throw new CliError(
      `--metrics ${url}: ${(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message}`,
    )
  }
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = SAMPLE.exec(line)
    if (!m) continue
    const labels = Object.fromEntries(
      [...m[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    )
    if (only !== undefined && labels.limiter !== only) continue
    const key = `${labels.limiter}\n${labels.policy}\n${labels.outcome}`
    out.set(key, (out.get(key) ?? 0) + Number(m[3]))
  }
  return out
}
