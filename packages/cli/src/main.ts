/**
 * The `tollgate` command: `inspect` what is stored for an identity (without spending), `reset` one
 * identity, `watch` a limiter's decisions live from a Prometheus `/metrics` endpoint, `block` and `allow`
 * identities at runtime. Against one Redis
 * (`--url`) or a Redis Cluster (`--cluster`). The keys say each policy's algorithm and window; a limit
 * comes from the flags or a config module. See docs/observability.md#the-command-line.
 * @module
 */
import { parseArgs } from 'node:util'
import packageJson from '../package.json' with { type: 'json' }
import { CONTROL_COMMANDS, type ControlCommand, control } from './blocks'
import { connect } from './connect'
import { dashboard } from './dashboard'
import { describe } from './describe'
import { CliError, type Io } from './errors'
import { inspect, reset } from './identity'
import { override } from './override'
import { top } from './top'
import { watch } from './watch'

export { CliError, type Io } from './errors'

/** The package version, as `tollgate --version` prints it. */
export const VERSION: string = packageJson.version

export const HELP = `Usage: tollgate [options] <command>

Commands:
  inspect <identity>        what is stored for an identity, per policy, without spending
  inspect <policy>=<identity> ...   one identity per policy (multi-policy limiters)
  reset <identity>          delete every key of one identity (every policy)
  reset <policy>=<identity> ...     only these policies' keys
  watch                     decisions per limiter and policy, live, from a /metrics endpoint
  top                       the identities each policy refused most, with their remaining budget
  dashboard                 a web page: top refused identities, one identity's state, reset, a chart,
                            blocks
  block <identity> --for <duration> [--reason <text>]
                            refuse every call naming the identity, in every policy, for that long
  unblock <identity>        end its block
  blocks [--limit <n>]      the live blocks of the prefix, with their reason and time left
  allow <identity> --for <duration>
                            admit its calls without spending, for that long (a block still wins)
  unallow <identity>        end its allow entry
  override set <identity> <policy>=<limit> ... [--ttl <duration>]
                            an identity's own limits, applied on every process's next call (needs
                            --config or --policy/--limit with windows; one <limit> for one policy)
  override get <identity> | override list [--limit <n>] | override rm <identity>
  version                   the version of this command (also --version)

Redis:
  --url <redis://host:port> Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379)
  --cluster                 the URL is a node of a Redis Cluster (any node)
  --prefix <prefix>         key prefix (default 'tollgate', or the config's)
  --secret <secret>         the store's secret under storage: 'compact' (default: $TOLLGATE_SECRET, else
                            the prefix's kept in Redis): inspect and reset find its compact counters too

Limits (optional: each key says its algorithm and window; a limit adds remaining and retry time):
  --config <module>         a module whose default export (or 'limiter') is a RateLimiter or its
                            options without 'store' ({ prefix, policies } or { prefix, limit, window })
  --limit <n> [--window <w>] [--algorithm <a>] [--burst <n>]    a single-policy limiter
  --policy <name>=<limit>[/<window>[/<algorithm>]]              a named policy (repeatable)
  A window or algorithm that disagrees with the stored key is warned about; the key wins.

Blocks and allow entries (block, unblock, blocks, allow, unallow):
  --for <duration>          how long: 10m, 1h, 1d, 1h30m (at most 365d)
  --reason <text>           why, shown by blocks and the dashboard (at most 200 characters)
  --limit <n>               blocks: how many to list (default and at most 1000)
  Entries hold for an identity under a prefix, in every policy: only --prefix (or --config's) applies.

Watch:
  --metrics <url>           the Prometheus endpoint of an app using @tollgate/prometheus
  --limiter <name>          only this limiter
  --interval <duration>     between samples (default 1s)
  --count <n>               stop after n samples (default: until interrupted)

Top (tollgate top [--watch]):
  --limit <n>               how many identities (default 10); limits come from --config or --policy
  --policy <name>           only this policy (repeatable); <name>=<limit>[/<window>] describes one
  --watch                   redraw every --interval (default 1s), --count times (default: until interrupted)

Dashboard (tollgate dashboard):
  --port <n> --host <h>     where it listens (default 127.0.0.1:9464); a non-loopback host needs --token
  --token <secret>          required on every request (Authorization: Bearer, or ?token= for the page)
  --metrics <url>           the chart's data, sampled every --interval (default 2s)

Other:
  --json                    machine-readable output (one JSON document; watch: one per line)
  -v, --version             the version of this command
  -h, --help                this text`

const OPTIONS = {
  url: { type: 'string' },
  cluster: { type: 'boolean' },
  config: { type: 'string' },
  prefix: { type: 'string' },
  secret: { type: 'string' },
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
  watch: { type: 'boolean' },
  port: { type: 'string' },
  host: { type: 'string' },
  token: { type: 'string' },
  ttl: { type: 'string' },
  for: { type: 'string' },
  reason: { type: 'string' },
  version: { type: 'boolean', short: 'v' },
  help: { type: 'boolean', short: 'h' },
} as const

export type Flags = ReturnType<typeof parse>['values']

function parse(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (error) {
    throw new CliError(`${(error as Error).message}\n(see tollgate --help)`, 2)
  }
}

/**
 * Runs the command line; resolves to the exit code (0 done, 1 environment, 2 usage).
 *
 * @example
 * process.exitCode = await run(process.argv.slice(2))
 */
export async function run(argv: string[], io: Io = consoleIo): Promise<number> {
  try {
    const { values, positionals } = parse(argv)
    const [command, ...args] = positionals
    if (values.version || command === 'version') {
      io.out(VERSION)
      return 0
    }
    if (values.help || command === undefined || command === 'help') {
      io.out(HELP)
      return command === undefined && !values.help ? 2 : 0
    }
    if (!CONTROL_COMMANDS.includes(command)) {
      if (values.for !== undefined) throw new CliError('--for goes with block and allow', 2)
      if (values.reason !== undefined) throw new CliError('--reason goes with block', 2)
    }
    if (command === 'watch') return await watch(values, io)
    if (command === 'top') {
      if (args.length > 0) throw new CliError(`top: unexpected argument '${args[0]}'`, 2)
      return await top(values, io)
    }
    if (command === 'dashboard') {
      if (args.length > 0) throw new CliError(`dashboard: unexpected argument '${args[0]}'`, 2)
      return await dashboard(values, io)
    }
    if (values.watch) throw new CliError('--watch goes with top', 2)
    if (command === 'override') return await override(args, values, io)
    if (values.ttl !== undefined) throw new CliError('--ttl goes with override set', 2)
    if (CONTROL_COMMANDS.includes(command)) return await control(command as ControlCommand, args, values, io)
    if (command !== 'inspect' && command !== 'reset') {
      throw new CliError(
        `unknown command '${command}' (inspect, reset, watch, top, dashboard, override, block, unblock, blocks, allow, unallow; see tollgate --help)`,
        2,
      )
    }
    if (args.length === 0)
      throw new CliError(`${command}: give an identity, e.g. tollgate ${command} user:42`, 2)
    const secret = values.secret ?? (process.env.TOLLGATE_SECRET || undefined)
    if (secret !== undefined && secret.length < 16) {
      throw new CliError(
        `--secret: the store's secret is at least 16 characters (${values.secret === undefined ? '$TOLLGATE_SECRET' : 'given'}: ${secret.length})`,
        2,
      )
    }
    const description = await describe(values)
    const redis = await connect(values)
    try {
      const prefix = description?.prefix ?? values.prefix ?? 'tollgate'
      const target = { redis, description, args, prefix, secret }
      return command === 'inspect'
        ? await inspect(target, values.json === true, io)
        : await reset(target, values.json === true, io)
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
  tty: process.stdout.isTTY === true,
}
