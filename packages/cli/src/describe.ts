/**
 * The limiter a user describes, from a config module or the flags. Every part is optional but the
 * limit: what is stored says the algorithm and the window, and a description that disagrees with it is
 * warned about, never trusted over it.
 * @module
 */
import { pathToFileURL } from 'node:url'
import {
  type Algorithm,
  MemoryStore,
  type PolicyOptions,
  parseKey,
  RateLimiter,
  type RateLimiterOptions,
} from '@tollgate/core'
import { CliError } from './errors'
import { type CalendarLabel, parseCalendarWindow, parseHumanDuration } from './format'

/** One described policy. `name` is undefined for a single-policy limiter (its keys carry no name). */
export interface DescribedPolicy {
  name: string | undefined
  limit: number
  algorithm?: Algorithm
  windowMs?: number
  /** A calendar window (`--window month@Europe/Berlin`, or a config's `{ calendar, timeZone }`). */
  calendar?: CalendarLabel
  burst?: number
  /** The rest of the policy's options (a penalty), passed on when the state is read. */
  extra?: Pick<PolicyOptions, 'penalty'>
}

export interface Description {
  /** The prefix it names, if any (--prefix wins over a config's). */
  prefix?: string
  policies: DescribedPolicy[]
  /** Where it came from, for warnings: `--config ./limits.mjs` or `the flags`. */
  source: string
}

export interface DescribeFlags {
  config?: string
  prefix?: string
  limit?: string
  window?: string
  algorithm?: string
  burst?: string
  policy?: string[]
}

const ALGORITHMS: readonly string[] = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'gcra',
  'concurrency',
]

/** The description from --config or the flags; undefined when there is none (only the keys are read). */
export async function describe(values: DescribeFlags): Promise<Description | undefined> {
  if (values.config !== undefined) {
    if (values.limit || values.window || values.policy || values.algorithm || values.burst) {
      throw new CliError('--config cannot be combined with --limit/--window/--algorithm/--burst/--policy', 2)
    }
    return fromConfig(values.config, values.prefix)
  }
  if (values.policy?.length) {
    if (values.limit || values.window || values.algorithm || values.burst) {
      throw new CliError('use --policy or --limit/--window/--algorithm/--burst, not both', 2)
    }
    const policies = values.policy.map((spec) => {
      // a calendar window's zone may hold '/': `monthly=100000/month@Europe/Berlin` (always fixed-window)
      const c = /^([A-Za-z0-9_.-]+)=(\d+)\/((?:day|week|month|year)(?:@.+)?)$/.exec(spec)
      if (c) return flagPolicy(c[1]!, c[2]!, c[3], undefined, undefined, `--policy ${spec}`)
      const m = /^([A-Za-z0-9_.-]+)=(\d+)(?:\/([^/]+))?(?:\/([^/]+))?$/.exec(spec)
      if (!m) throw new CliError(`--policy ${spec}: expected <name>=<limit>[/<window>[/<algorithm>]]`, 2)
      return flagPolicy(m[1]!, m[2]!, m[3], m[4], undefined, `--policy ${spec}`)
    })
    return { prefix: values.prefix, policies, source: 'the flags' }
  }
  if (values.limit === undefined) {
    if (values.window || values.algorithm || values.burst) {
      throw new CliError('give --limit with --window/--algorithm/--burst (or only the identity)', 2)
    }
    return undefined
  }
  return {
    prefix: values.prefix,
    policies: [flagPolicy(undefined, values.limit, values.window, values.algorithm, values.burst, '--limit')],
    source: 'the flags',
  }
}

function flagPolicy(
  name: string | undefined,
  limit: string,
  window: string | undefined,
  algorithm: string | undefined,
  burst: string | undefined,
  flag: string,
): DescribedPolicy {
  const where = name === undefined ? '' : `${flag}: `
  if (!/^\d+$/.test(limit) || Number(limit) < 1)
    throw new CliError(`${where}${name ? 'limit' : '--limit'} ${limit}: expected a positive integer`, 2)
  const policy: DescribedPolicy = { name, limit: Number(limit) }
  const calendar = window === undefined ? undefined : parseCalendarWindow(window)
  if (calendar) {
    policy.calendar = calendar
    window = undefined
  }
  if (window !== undefined) {
    const ms = parseHumanDuration(window)
    if (ms === undefined || ms < 1)
      throw new CliError(
        `${where}${name ? 'window' : '--window'} ${window}: expected e.g. 500ms, 10s, 15m, 1h, 1d, month@Europe/Berlin`,
        2,
      )
    policy.windowMs = ms
  }
  if (algorithm !== undefined) {
    if (!ALGORITHMS.includes(algorithm))
      throw new CliError(
        `${where}${name ? 'algorithm' : '--algorithm'} ${algorithm}: expected one of ${ALGORITHMS.join(', ')}`,
        2,
      )
    policy.algorithm = algorithm as Algorithm
  }
  if (burst !== undefined) {
    if (!/^\d+$/.test(burst) || Number(burst) < 1)
      throw new CliError(`--burst ${burst}: expected a positive integer`, 2)
    policy.burst = Number(burst)
  }
  return policy
}

async function fromConfig(file: string, prefixFlag: string | undefined): Promise<Description> {
  let mod: Record<string, unknown>
  try {
    mod = await import(pathToFileURL(file).href)
  } catch (error) {
    throw new CliError(`--config ${file}: cannot load it (${(error as Error).message})`, 2)
  }
  const exported = (mod.limiter ?? mod.default) as unknown
  if (!exported || typeof exported !== 'object') {
    throw new CliError(`--config ${file}: export a RateLimiter or its options (default or 'limiter')`, 2)
  }
  let limiter: RateLimiter
  // instanceof recognises a limiter of either build (ESM, CommonJS) or copy of @tollgate/core
  if (exported instanceof RateLimiter) {
    limiter = exported
  } else {
    // Built on a MemoryStore only to validate the options and resolve their defaults, as the app does.
    const { store: _store, ...options } = exported as RateLimiterOptions
    try {
      limiter = new RateLimiter({ ...options, store: new MemoryStore() } as RateLimiterOptions)
    } catch (error) {
      throw new CliError(`--config ${file}: ${(error as Error).message}`, 2)
    }
  }
  const single = limiter.policies.length === 1 && !hasNamedPolicies(exported)
  return {
    prefix: prefixFlag ?? limiter.prefix,
    source: `--config ${file}`,
    policies: limiter.policies.map((p) => ({
      name: single ? undefined : p.name,
      limit: p.limit,
      algorithm: p.algorithm,
      windowMs: p.windowMs,
      ...(p.calendar ? { calendar: { unit: p.calendar.unit, timeZone: p.calendar.timeZone } } : {}),
      burst: p.burst,
      ...(p.penalty
        ? {
            extra: {
              penalty: {
                after: p.penalty.after,
                within: p.penalty.withinMs,
                block: p.penalty.blockMs,
                factor: p.penalty.factor,
                max: p.penalty.maxMs,
                forget: p.penalty.forgetMs,
              },
            },
          }
        : {}),
    })),
  }
}

/** Whether the limiter (or its options) names its policies: then every key carries the name. */
function hasNamedPolicies(exported: object): boolean {
  if (exported instanceof RateLimiter) {
    return parseKey(exported.keysFor('x')[0]!)?.policy !== undefined
  }
  return (exported as { policies?: unknown }).policies !== undefined
}
