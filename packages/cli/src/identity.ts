/**
 * `inspect` and `reset`: which identities (and policies) the arguments name, what is stored for them,
 * and how the answer prints (a table with a header row, or one JSON document).
 * @module
 */
import type { Connection } from './connect'
import type { DescribedPolicy, Description } from './describe'
import { CliError, type Io } from './errors'
import { formatDuration, formatWindow, table } from './format'
import { type InspectRow, readPairs, resetCompact } from './inspect'
import {
  compactSecrets,
  deleteState,
  findState,
  prefixHasCompact,
  prefixHasKeys,
  type StoredPair,
  type StoredState,
} from './state'

export interface Target {
  redis: Connection
  description: Description | undefined
  args: string[]
  prefix: string
  /** The store's secret under `storage: 'compact'`: compact counters are found too. */
  secret?: string
}

/** One identity, and the one policy it is for (`<policy>=<identity>`), if the argument names one. */
interface Ask {
  identity: string
  policy?: string
}

const PER_POLICY = /^([A-Za-z0-9_.-]{1,64})=(.+)$/s

function asks(target: Target): { asks: Ask[]; fallback?: Ask[] } {
  const { args, description } = target
  const named = description?.policies.filter((p) => p.name !== undefined).map((p) => p.name as string)
  const perPolicy = args.map((a) => PER_POLICY.exec(a))
  // PER_POLICY's two groups are not optional: a match has both
  const ok = (m: RegExpExecArray | null) => m !== null && (!named?.length || named.includes(m[1]!))
  const split = () => perPolicy.map((m) => ({ policy: m![1]!, identity: m![2]! }))
  if (args.length > 1) {
    if (!perPolicy.every(ok)) {
      throw new CliError(
        `one identity, or <policy>=<identity> per policy${named?.length ? ` (${named.join(', ')})` : ''}`,
        2,
      )
    }
    return { asks: split() }
  }
  // one argument here: main refuses a call without an identity
  const first = perPolicy[0]!
  if (named?.length && ok(first)) return { asks: split() }
  // `a=b` is also a valid identity: read as one first, as a policy's identity if nothing is stored.
  return { asks: [{ identity: args[0]! }], fallback: first ? split() : undefined }
}

interface Found {
  ask: Ask
  pairs: StoredPair[]
  keys: string[]
}

/** Keeps what belongs to `policy` (its pair keys, their markers, its keys in an older layout). */
function only(state: StoredState, policy: string | undefined): Omit<Found, 'ask'> {
  if (policy === undefined) return { pairs: state.pairs, keys: state.all }
  const pairs = state.pairs.filter((p) => p.policy === policy)
  const keys = state.all.filter((k) => {
    const rest = k.slice(k.indexOf('}:') + 2)
    return rest === policy || rest.startsWith(`${policy}:`) || rest.startsWith(`${policy}!`)
  })
  return { pairs, keys }
}

/** What the target's identities have stored; `place`: the secret that finds compact counters too. */
async function find(target: Target, place: string | undefined): Promise<Found[]> {
  const { asks: first, fallback } = asks(target)
  const look = (list: Ask[]) =>
    Promise.all(
      list.map(async (ask) => ({
        ask,
        ...only(await findState(target.redis, target.prefix, ask.identity, place), ask.policy),
      })),
    )
  const found = await look(first)
  if (fallback && found.every((f) => f.keys.length === 0)) {
    const again = await look(fallback)
    if (again.some((f) => f.keys.length > 0)) return again
  }
  return found
}

function who(target: Target): string {
  return target.args.map((a) => `'${a}'`).join(' ')
}

/**
 * Without the secret, compact counters cannot be found: when the prefix holds some, an answer of "no
 * state" would be wrong. Nothing found: an error asking for the secret; something found: a note.
 */
async function checkCompact(
  target: Target,
  io: Io,
  nothing: boolean,
  place: string | undefined,
): Promise<void> {
  if (place !== undefined || !(await prefixHasCompact(target.redis, target.prefix))) return
  const why =
    `prefix '${target.prefix}' holds compact counters (storage: 'compact'), which only the store's ` +
    `secret finds: give --secret <secret> or set $TOLLGATE_SECRET`
  if (nothing) throw new CliError(`no key of its own for ${who(target)}, but ${why}`)
  io.err(`note: ${why} (not read)`)
}

/** A prefix with no key at all is almost always a typo: said on stderr, next to "no state stored". */
export async function warnUnknownPrefix(target: Pick<Target, 'redis' | 'prefix'>, io: Io): Promise<void> {
  if ((await prefixHasKeys(target.redis, target.prefix)) === false) {
    io.err(
      `warning: no key at all starts with '${target.prefix}:' on ${target.redis.url}: check --prefix (or the config's prefix)`,
    )
  }
}

/**
 * `tollgate reset`: deletes what it finds, and gives compact counters back to 0 (their fields stay, so
 * the identities after them in their bucket stay where lookups find them); exit 0 whether or not there
 * was anything.
 */
export async function reset(target: Target, json: boolean, io: Io): Promise<number> {
  const secrets = await compactSecrets(target.redis, target.prefix, target.secret)
  const found = await find(target, secrets.place)
  await checkCompact(
    target,
    io,
    found.every((f) => f.keys.length === 0),
    secrets.place,
  )
  const keys = [...new Set(found.flatMap((f) => f.keys))]
  // Keys of different identities may live on different primaries: one DEL per identity.
  let removed = 0
  let zeroed = 0
  for (const f of found) {
    removed += await deleteState(target.redis, f.keys)
    for (const pair of f.pairs) {
      if (!pair.compact) continue
      await resetCompact(target.redis, target.prefix, secrets.store, f.ask.identity, pair)
      zeroed++
    }
  }
  const counters = found.flatMap((f) => f.pairs.flatMap((p) => (p.compact ? [p.key] : [])))
  if (json) {
    io.out(
      JSON.stringify({
        prefix: target.prefix,
        identities: found.map((f) => f.ask),
        removed,
        keys,
        ...(secrets.place === undefined ? {} : { zeroed, counters }),
      }),
    )
  } else if (removed === 0 && zeroed === 0) {
    io.out(`no state stored for ${who(target)} under prefix '${target.prefix}': nothing to reset`)
  } else {
    const parts = []
    if (removed > 0) parts.push(`removed ${removed} key${removed === 1 ? '' : 's'}`)
    if (zeroed > 0) parts.push(`reset ${zeroed} compact counter${zeroed === 1 ? '' : 's'}`)
    io.out(`${parts.join(' and ')} of ${who(target)}`)
  }
  if (removed === 0 && zeroed === 0) await warnUnknownPrefix(target, io)
  return 0
}

/** The described policy that applies to a stored pair, if any. */
function describedFor(description: Description | undefined, pair: StoredPair): DescribedPolicy | undefined {
  return description?.policies.find((p) => p.name === pair.policy)
}

/** `tollgate inspect`. */
export async function inspect(target: Target, json: boolean, io: Io): Promise<number> {
  const { description, redis, prefix } = target
  const warn = (line: string) => io.err(line)
  const secrets = await compactSecrets(redis, prefix, target.secret)
  const found = await find(target, secrets.place)
  await checkCompact(
    target,
    io,
    found.every((f) => f.keys.length === 0),
    secrets.place,
  )
  const rows: Array<InspectRow & { identity: string }> = []
  const missing: Array<{ policy: string; identity: string; described: DescribedPolicy }> = []
  for (const f of found) {
    for (const pair of f.pairs) {
      if (description && !describedFor(description, pair)) {
        warn(
          `warning: ${description.source} has no ${pair.policy === undefined ? 'single-policy limiter' : `policy '${pair.policy}'`} for ${pair.key}: showing what is stored`,
        )
      }
    }
    const read = await readPairs(
      redis,
      prefix,
      secrets.store,
      f.ask.identity,
      f.pairs,
      (pair) => describedFor(description, pair),
      description,
      warn,
    )
    for (const r of read) rows.push({ identity: f.ask.identity, ...r })
    const parsed = new Set(f.pairs.map((p) => p.key))
    for (const k of f.keys) {
      const named = (p: StoredPair) =>
        k.startsWith(`${p.key}!`) ||
        (p.compact !== undefined && k.startsWith(`${p.compact.first}!${p.compact.field}!`))
      if (!parsed.has(k) && !f.pairs.some(named))
        warn(`warning: ${k} is not in this version's key layout: not read (reset deletes it)`)
    }
    for (const d of description?.policies ?? []) {
      const wanted = f.ask.policy === undefined || f.ask.policy === d.name
      if (wanted && !f.pairs.some((p) => p.policy === d.name)) {
        missing.push({ policy: d.name ?? 'default', identity: f.ask.identity, described: d })
      }
    }
  }
  const stored = rows.length > 0
  const withLimit = rows.some((r) => r.limit !== undefined)
  if (json) {
    io.out(
      JSON.stringify({
        prefix,
        identities: found.map((f) => f.ask),
        stored,
        policies: [
          ...rows.map((r) => ({
            ...r,
            retryAfterMs:
              r.retryAfterMs === undefined
                ? undefined
                : Number.isFinite(r.retryAfterMs)
                  ? r.retryAfterMs
                  : null,
          })),
          ...(stored ? missing.map((m) => ({ policy: m.policy, identity: m.identity, key: null })) : []),
        ],
      }),
    )
  } else if (!stored) {
    io.out(`no state stored for ${who(target)} under prefix '${prefix}'`)
  } else {
    const header = ['POLICY', 'ALGORITHM', 'WINDOW', 'USED', ...(withLimit ? ['REMAINING'] : []), 'RESET']
    header.push(...(withLimit ? ['RETRY-AFTER'] : []), 'KEY')
    const cells = rows.map((r) => [
      r.policy,
      r.algorithm,
      formatWindow(r.windowMs, r.calendar),
      r.used === undefined ? '-' : String(r.used),
      ...(withLimit ? [r.limit === undefined ? '-' : `${r.remaining}/${r.limit}`] : []),
      formatDuration(r.resetMs),
      ...(withLimit
        ? [r.retryAfterMs === undefined ? '-' : r.retryAfterMs === 0 ? '0s' : formatDuration(r.retryAfterMs)]
        : []),
      r.key,
    ])
    for (const m of missing) {
      const d = m.described
      cells.push([
        m.policy,
        d.algorithm ?? '-',
        d.calendar
          ? formatWindow(0, d.calendar)
          : d.windowMs === undefined
            ? '-'
            : formatDuration(d.windowMs),
        '-',
        ...(withLimit ? ['-'] : []),
        '-',
        ...(withLimit ? ['-'] : []),
        'no state stored',
      ])
    }
    for (const line of table(header, cells)) io.out(line)
  }
  if (!stored) await warnUnknownPrefix(target, io)
  else if (rows.some((r) => r.limit === undefined)) {
    warn(
      `note: remaining cannot be told without the limit: give --limit, --policy or --config${withLimit ? ' for the policies shown without one' : ''}`,
    )
  }
  return 0
}
