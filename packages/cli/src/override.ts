/**
 * `override set | get | list | rm`: per-identity limits kept in Redis, through the core limiter's own
 * `overrides` (docs/quotas.md). Setting one needs the limiter's policies (`--config`, or `--policy` /
 * `--limit` with their windows), so a limit is checked as the app's own limiter checks it; reading and
 * removing need only the prefix.
 * @module
 */
import { InputError, type PolicyOptions, RateLimiter, type RateLimiterOptions } from '@tollgate/core'
import { withoutPrefixCheck } from '@tollgate/core/scripts'
import { parseFor } from './blocks'
import { type Connection, connect } from './connect'
import { type DescribedPolicy, type Description, describe } from './describe'
import { CliError, type Io } from './errors'
import { formatDuration, table } from './format'
import { controlStore } from './state'

export interface OverrideFlags {
  url?: string
  cluster?: boolean
  config?: string
  prefix?: string
  limit?: string
  window?: string
  algorithm?: string
  burst?: string
  policy?: string[]
  ttl?: string
  json?: boolean
}

type OverrideLimits = Parameters<RateLimiter['overrides']['set']>[1]

/** A command line waits longer than an app's 500 ms default. */
const TIMEOUT_MS = 5000
const MAX_LISTED = 1000

/** A described policy as the limiter's options; its window is required to check a limit. */
function policyOptions(p: DescribedPolicy): PolicyOptions {
  const window = p.calendar ? { calendar: p.calendar.unit, timeZone: p.calendar.timeZone } : p.windowMs
  if (window === undefined) {
    throw new CliError(
      `override set: give ${p.name ? `policy ${p.name}` : 'the policy'}'s window (e.g. --policy ${p.name ?? 'monthly'}=${p.limit}/month@UTC, or --config)`,
      2,
    )
  }
  return {
    limit: p.limit,
    window,
    ...(p.algorithm ? { algorithm: p.algorithm } : {}),
    ...(p.burst && (p.algorithm === 'token-bucket' || p.algorithm === 'gcra') ? { burst: p.burst } : {}),
  } as PolicyOptions
}

/** The limiter `overrides` goes through: the described one, or a placeholder when only the prefix matters. */
export async function limiterOf(
  redis: Connection,
  prefix: string,
  description: Description | undefined,
): Promise<RateLimiter> {
  const store = await controlStore(redis, prefix, process.env.TOLLGATE_SECRET || undefined)
  const base = { store, prefix, timeoutMs: TIMEOUT_MS, top: false as const }
  return withoutPrefixCheck(() => {
    if (description === undefined) return new RateLimiter({ ...base, limit: 1, window: '1s' })
    const [first] = description.policies
    if (description.policies.length === 1 && first!.name === undefined)
      return new RateLimiter({ ...base, ...policyOptions(first!) } as RateLimiterOptions)
    const policies = Object.fromEntries(description.policies.map((p) => [p.name!, policyOptions(p)]))
    return new RateLimiter({ ...base, policies } as RateLimiterOptions)
  })
}

/** `<limit>`, `<limit>@<day>` or `@<day>` (a calendar month's billing day) as one policy's override. */
function parseOne(text: string): { limit?: number; billingDay?: number } | undefined {
  const m = /^(\d*)(?:@(\d+))?$/.exec(text)
  if (m === null || (m[1] === '' && m[2] === undefined)) return undefined
  return {
    ...(m[1] !== '' && { limit: Number(m[1]) }),
    ...(m[2] !== undefined && { billingDay: Number(m[2]) }),
  }
}

/**
 * `<policy>=<limit> ...`, or one `<limit>` for a one-policy limiter, as `overrides.set` takes them; a
 * limit may carry a calendar month's billing day (`monthly=500000@17`, or `monthly=@17` alone).
 */
function parseLimits(args: string[], description: Description): OverrideLimits {
  const single = description.policies.length === 1 && description.policies[0]!.name === undefined
  if (single) {
    const one = args.length === 1 ? parseOne(args[0]!) : undefined
    if (one === undefined)
      throw new CliError(
        `override set: give one limit for this one-policy limiter, e.g. 500000 (or 500000@17)`,
        2,
      )
    return one as OverrideLimits
  }
  if (args.length === 0) throw new CliError('override set: give <policy>=<limit>, e.g. monthly=500000', 2)
  const out: Record<string, { limit?: number; billingDay?: number }> = {}
  for (const arg of args) {
    const at = arg.indexOf('=')
    const one = at > 0 ? parseOne(arg.slice(at + 1)) : undefined
    if (one === undefined)
      throw new CliError(
        `override set: '${arg}' is not <policy>=<limit>, e.g. monthly=500000 (or monthly=500000@17, monthly=@17 for a billing day)`,
        2,
      )
    out[arg.slice(0, at)] = one
  }
  return out as OverrideLimits
}

/** One policy's override as typed: `500000`, `500000@17` or `@17`. */
function shownOne(o: { limit?: number; billingDay?: number }): string {
  return `${o.limit ?? ''}${o.billingDay === undefined ? '' : `@${o.billingDay}`}`
}

/** Limits as one line: `monthly=500000 rate=20`, or `500000` for a one-policy limiter. */
export function shownLimits(limits: OverrideLimits): string {
  if (typeof limits.limit === 'number' || typeof limits.billingDay === 'number') {
    return shownOne(limits as { limit?: number; billingDay?: number })
  }
  return Object.entries(limits as Record<string, { limit?: number; billingDay?: number }>)
    .map(([name, o]) => `${name}=${shownOne(o)}`)
    .join(' ')
}

const shownLeft = (ms: number) => (Number.isFinite(ms) ? formatDuration(ms) : 'no end')

/** Runs one `override` subcommand; resolves to the exit code. */
export async function override(args: string[], values: OverrideFlags, io: Io): Promise<number> {
  const [sub, ...rest] = args
  if (sub !== 'set' && sub !== 'get' && sub !== 'list' && sub !== 'rm') {
    throw new CliError(`override: expected set, get, list or rm (see tollgate --help)`, 2)
  }
  if (values.ttl !== undefined && sub !== 'set') throw new CliError('--ttl goes with override set', 2)
  const ttl = values.ttl === undefined ? undefined : `${parseFor(values.ttl, '--ttl')}ms`
  let rows = MAX_LISTED
  if (sub === 'list') {
    if (rest.length > 0) throw new CliError(`override list: unexpected argument '${rest[0]}'`, 2)
    if (values.limit !== undefined && values.config === undefined && !values.policy?.length) {
      if (!/^\d+$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > MAX_LISTED)
        throw new CliError(`--limit ${values.limit}: expected how many overrides, from 1 to ${MAX_LISTED}`, 2)
      rows = Number(values.limit)
      values = { ...values, limit: undefined }
    }
  } else if (rest.length === 0 || rest[0] === '') {
    throw new CliError(`override ${sub}: give an identity, e.g. tollgate override ${sub} key:acme`, 2)
  }
  if (sub !== 'set' && sub !== 'list' && rest.length > 1)
    throw new CliError(`override ${sub}: unexpected argument '${rest[1]}'`, 2)
  const description = await describe(values)
  if (sub === 'set' && description === undefined) {
    throw new CliError(
      'override set: describe the limiter so the limit is checked as the app checks it: --config <module>, or --policy <name>=<limit>/<window> (repeatable), or --limit and --window',
      2,
    )
  }
  const limits = sub === 'set' ? parseLimits(rest.slice(1), description!) : undefined
  const redis = await connect(values)
  try {
    const prefix = description?.prefix ?? values.prefix ?? 'tollgate'
    const overrides = (await limiterOf(redis, prefix, description)).overrides
    const identity = rest[0]!
    if (sub === 'set') {
      try {
        await overrides.set(identity, limits!, ttl === undefined ? undefined : { ttl })
      } catch (error) {
        // the limiter's own check of the limits (a policy it lacks, a limit too large): refused before any write
        if (error instanceof InputError) throw new CliError(`override set: ${error.message}`, 2)
        throw error
      }
      io.out(
        values.json
          ? JSON.stringify({ identity, limits, ttl: values.ttl ?? null })
          : `${identity}: ${shownLimits(limits!)} (${values.ttl ? `for ${values.ttl}` : 'no end'}), applied on every process's next call`,
      )
    } else if (sub === 'get') {
      const held = await overrides.get(identity)
      if (values.json) io.out(JSON.stringify(held ?? null))
      else io.out(held ? `${identity}: ${shownLimits(held)}` : `${identity}: no override`)
    } else if (sub === 'rm') {
      await overrides.delete(identity)
      io.out(values.json ? JSON.stringify({ identity, removed: true }) : `${identity}: override removed`)
    } else {
      const listed = await overrides.list({ limit: rows })
      if (values.json) {
        io.out(
          JSON.stringify(
            listed.map((o) => ({ ...o, expiresInMs: Number.isFinite(o.expiresInMs) ? o.expiresInMs : null })),
          ),
        )
      } else if (listed.length === 0) io.out(`no overrides under prefix '${prefix}'`)
      else
        for (const line of table(
          ['IDENTITY', 'LIMITS', 'ENDS IN'],
          listed.map((o) => [o.identity, shownLimits(o.limits), shownLeft(o.expiresInMs)]),
        ))
          io.out(line)
    }
    return 0
  } finally {
    await redis.close()
  }
}
