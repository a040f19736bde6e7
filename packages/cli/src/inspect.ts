/**
 * `tollgate inspect`: reads each stored key of an identity with the real script (a peek through a
 * limiter built from the key's own algorithm and window), so the numbers are the ones the app's next
 * call would see. With a described limit it prints remaining and reset; without one, what is stored.
 * @module
 */
import {
  type Algorithm,
  MemoryStore,
  type PolicyOptions,
  RateLimiter,
  type RateLimiterOptions,
  RedisStore,
} from '@tollgate/core'
import { withoutPrefixCheck } from '@tollgate/core/scripts'
import type { Connection } from './connect'
import type { DescribedPolicy, Description } from './describe'
import { CliError } from './errors'
import { type CalendarLabel, formatWindow } from './format'
import type { StoredPair } from './state'

/** One row of `inspect`: numbers the CLI could tell, `undefined` where it cannot. */
export interface InspectRow {
  policy: string
  algorithm: Algorithm
  windowMs: number
  /** A calendar window's period and zone (then `windowMs` is its nominal length). */
  calendar?: CalendarLabel
  key: string
  /** Units spent in the window (window algorithms, concurrency); undefined for gcra and token-bucket without a limit. */
  used?: number
  limit?: number
  remaining?: number
  /** Until the pair is back to its full quota (for gcra and token-bucket: until the bucket is full). */
  resetMs: number
  /** Until a call of cost 1 succeeds; Infinity: never. Only with a limit. */
  retryAfterMs?: number
}

const WINDOW_ALGORITHMS: ReadonlySet<Algorithm> = new Set([
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'concurrency',
])

/** The `window` option of a stored pair: its calendar window, or its length. */
function windowOption(pair: StoredPair): PolicyOptions['window'] {
  return pair.calendar ? { calendar: pair.calendar.unit, timeZone: pair.calendar.timeZone } : pair.windowMs
}

/** The largest limit each algorithm accepts for this window: read with it, spent = limit - remaining. */
function probeOptions(algorithm: Algorithm, windowMs: number, calendar?: CalendarLabel): PolicyOptions {
  if (calendar)
    return { window: { calendar: calendar.unit, timeZone: calendar.timeZone }, limit: 1_000_000_000 }
  const fits = Math.floor(2 ** 52 / windowMs)
  switch (algorithm) {
    case 'concurrency':
      return { concurrency: 10_000, lease: windowMs } as unknown as PolicyOptions
    case 'sliding-log':
      return { algorithm, window: windowMs, limit: Math.min(10_000, fits) }
    case 'sliding-window':
      return { algorithm, window: windowMs, limit: Math.min(2 ** 26 - 1, fits) }
    case 'fixed-window':
      return { algorithm, window: windowMs, limit: Math.min(1_000_000_000, fits) }
    default:
      // gcra, token-bucket: the time until full does not depend on the limit; a burst this large keeps
      // the script from capping a bucket that a larger burst filled.
      return {
        algorithm,
        window: windowMs,
        limit: 1,
        burst: Math.min(1_000_000_000, Math.floor(fits / 1000)),
      }
  }
}

function describedOptions(pair: StoredPair, d: DescribedPolicy): PolicyOptions {
  if (pair.algorithm === 'concurrency')
    return { concurrency: d.limit, lease: pair.windowMs } as unknown as PolicyOptions
  const burst =
    (pair.algorithm === 'token-bucket' || pair.algorithm === 'gcra') &&
    d.burst !== undefined &&
    d.burst !== d.limit
      ? { burst: d.burst }
      : {}
  const penalty = d.algorithm === pair.algorithm && d.windowMs === pair.windowMs ? (d.extra ?? {}) : {}
  return { algorithm: pair.algorithm, window: windowOption(pair), limit: d.limit, ...burst, ...penalty }
}

/** A limiter of the one stored pair, with `options` (its algorithm and window), on the layout it is in. */
function pairLimiter(
  redis: Connection,
  prefix: string,
  secret: string | undefined,
  identity: string,
  pair: StoredPair,
  options: PolicyOptions,
): RateLimiter {
  const store = pair.compact
    ? new RedisStore(redis.client, { storage: 'compact', secret })
    : new RedisStore(redis.client)
  const base = { prefix, store, timeoutMs: 5000 }
  // One limiter per stored pair, on one client: together they would look like clashing limiters.
  const limiter = withoutPrefixCheck(
    () =>
      new RateLimiter(
        (pair.policy === undefined
          ? { ...base, ...options }
          : { ...base, policies: { [pair.policy]: options } }) as RateLimiterOptions,
      ),
  )
  // The limiter must read the very key that was found, or its numbers describe another key.
  const [key] = limiter.keysFor(identity)
  if (key !== pair.key)
    throw new CliError(`cannot read ${pair.key}: it is not the key this version builds (${key})`)
  return limiter
}

/** Peeks a pair's limiter (`pairLimiter`) through the real script, spending nothing. */
async function peekPair(limiter: RateLimiter, identity: string, url: string) {
  const decision = await limiter.peek(identity, { onStoreError: 'deny' })
  // a block or allow entry answers from Redis too ('block', 'allow'): only the failure policy did not
  if (decision.source === 'fallback') throw new CliError(`Redis did not answer (${url})`)
  return decision.policies[0]! // a pair's limiter has its one policy
}

/** Gives a compact counter back to 0 through the real reset script (its penalty state goes too). */
export async function resetCompact(
  redis: Connection,
  prefix: string,
  secret: string | undefined,
  identity: string,
  pair: StoredPair,
): Promise<void> {
  const limiter = pairLimiter(
    redis,
    prefix,
    secret,
    identity,
    pair,
    probeOptions(pair.algorithm, pair.windowMs, pair.calendar),
  )
  await limiter.reset(identity)
}

/** What the KEY column shows: the key, or where a compact counter is. */
function shownKey(pair: StoredPair): string {
  return pair.compact ? `${pair.compact.level} field ${pair.compact.field}` : pair.key
}

/**
 * Reads each stored pair; `describe(pair)` gives the described policy that applies to it (if any).
 * Warnings (a description that disagrees with the stored key) go to `warn`.
 */
export async function readPairs(
  redis: Connection,
  prefix: string,
  secret: string | undefined,
  identity: string,
  pairs: readonly StoredPair[],
  described: (pair: StoredPair) => DescribedPolicy | undefined,
  description: Description | undefined,
  warn: (line: string) => void,
): Promise<InspectRow[]> {
  const rows: InspectRow[] = []
  for (const pair of pairs) {
    const name = pair.policy ?? 'default'
    const d = described(pair)
    if (d && (d.algorithm ?? pair.algorithm) !== pair.algorithm) {
      warn(disagree(description, name, d, pair))
    } else if (d && describedWindow(d, pair) !== formatWindow(pair.windowMs, pair.calendar)) {
      warn(disagree(description, name, d, pair))
    }
    let options: PolicyOptions | undefined
    if (d) {
      try {
        options = describedOptions(pair, d)
        // validates the limit against the stored algorithm (sliding-log takes at most 10,000, ...)
        new RateLimiter({ store: new MemoryStore(), ...options } as RateLimiterOptions)
      } catch (error) {
        warn(
          `warning: limit ${d.limit} cannot apply to ${pair.key} (${(error as Error).message}): showing what is stored`,
        )
        options = undefined
      }
    }
    if (options && d) {
      const p = await peekPair(
        pairLimiter(redis, prefix, secret, identity, pair, options),
        identity,
        redis.url,
      )
      rows.push({
        policy: name,
        algorithm: pair.algorithm,
        windowMs: pair.windowMs,
        ...(pair.calendar ? { calendar: pair.calendar } : {}),
        key: shownKey(pair),
        used: p.limit - p.remaining,
        limit: p.limit,
        remaining: p.remaining,
        resetMs: p.resetMs,
        retryAfterMs: p.allowed ? 0 : p.retryAfterMs,
      })
      continue
    }
    const probe = probeOptions(pair.algorithm, pair.windowMs, pair.calendar)
    const p = await peekPair(pairLimiter(redis, prefix, secret, identity, pair, probe), identity, redis.url)
    rows.push({
      policy: name,
      algorithm: pair.algorithm,
      windowMs: pair.windowMs,
      ...(pair.calendar ? { calendar: pair.calendar } : {}),
      key: shownKey(pair),
      ...(WINDOW_ALGORITHMS.has(pair.algorithm) ? { used: p.limit - p.remaining } : {}),
      resetMs: p.resetMs,
    })
  }
  return rows
}

function disagree(
  description: Description | undefined,
  name: string,
  d: DescribedPolicy,
  pair: StoredPair,
): string {
  const said = `${d.algorithm ?? pair.algorithm} per ${describedWindow(d, pair)}`
  return (
    `warning: ${description?.source ?? 'the flags'}: policy '${name}' is ${said}, but the stored key ` +
    `${pair.key} is ${pair.algorithm} per ${formatWindow(pair.windowMs, pair.calendar)}: reading it as stored`
  )
}

/** The window a description gives a policy, as shown (the stored pair's where it gives none). */
function describedWindow(d: DescribedPolicy, pair: StoredPair): string {
  if (d.calendar) return formatWindow(0, d.calendar)
  if (d.windowMs !== undefined) return formatWindow(d.windowMs)
  return formatWindow(pair.windowMs, pair.calendar)
}
