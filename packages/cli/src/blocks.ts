/**
 * `block`, `unblock`, `blocks`, `allow` and `unallow`: block and allow entries, through the core
 * limiter's own methods (docs/blocks.md). An entry belongs to an identity under a prefix, whatever the
 * policies, so only the prefix (from `--prefix` or the config) is needed. Shared with the dashboard.
 * @module
 */
import { InputError, RateLimiter } from '@tollgate/core'
import { type Connection, connect } from './connect'
import { describe } from './describe'
import { CliError, type Io } from './errors'
import { formatDuration, parseHumanDuration, table } from './format'
import { warnUnknownPrefix } from './identity'
import { controlStore } from './state'

export type ControlCommand = 'block' | 'unblock' | 'blocks' | 'allow' | 'unallow'
export const CONTROL_COMMANDS: readonly string[] = ['block', 'unblock', 'blocks', 'allow', 'unallow']

export interface ControlFlags {
  url?: string
  cluster?: boolean
  config?: string
  prefix?: string
  for?: string
  reason?: string
  limit?: string
  window?: string
  algorithm?: string
  burst?: string
  policy?: string[]
  json?: boolean
}

/** The core's bounds (controls.ts), checked here too so bad input is a usage error before connecting. */
export const MAX_FOR_MS = 365 * 86_400_000
export const MAX_REASON_CHARS = 200
const MAX_IDENTITY_CHARS = 1024
const MAX_LISTED = 1000
/** Deadline of each store call: a command line can wait longer than an app's 500ms default. */
const TIMEOUT_MS = 5000

/** An entry's `for`, in ms: `10m`, `1h30m`, `1d` (a unit is required), at most 365 days. */
export function parseFor(text: string | undefined, option: string): number {
  if (text === undefined || text === '')
    throw new CliError(`${option}: required, how long the entry lasts, e.g. ${option} 1h`, 2)
  // a bare number would be milliseconds: `--for 60` is far more likely meant as minutes or seconds
  if (/^\d+$/.test(text))
    throw new CliError(`${option} ${text}: give a unit, e.g. ${text}s, ${text}m or ${text}h`, 2)
  const ms = parseHumanDuration(text)
  if (ms === undefined || ms < 1 || ms > MAX_FOR_MS)
    throw new CliError(`${option} ${text}: expected a duration from 1ms to 365d, e.g. 10m, 1h, 1d`, 2)
  return ms
}

/** Checks an identity as the core does, as a usage error naming `what`. */
export function checkIdentity(identity: string | undefined, what: string): string {
  if (identity === undefined || identity === '') throw new CliError(`${what}: give an identity`, 2)
  if (identity.length > MAX_IDENTITY_CHARS)
    throw new CliError(`${what}: an identity of at most ${MAX_IDENTITY_CHARS} characters`, 2)
  return identity
}

/** Checks a block's reason (at most 200 characters). */
export function checkReason(reason: string | undefined, option: string): string {
  if (reason !== undefined && reason.length > MAX_REASON_CHARS)
    throw new CliError(`${option}: at most ${MAX_REASON_CHARS} characters (given: ${reason.length})`, 2)
  return reason ?? ''
}

/**
 * A limiter on the connection, for its block and allow methods only: entries are keyed by prefix and
 * identity, so its one policy is a placeholder that decides nothing here.
 */
export async function controlLimiter(redis: Connection, prefix: string): Promise<RateLimiter> {
  return new RateLimiter({
    store: await controlStore(redis, prefix, process.env.TOLLGATE_SECRET || undefined),
    prefix,
    limit: 1,
    window: '1s',
    timeoutMs: TIMEOUT_MS,
  })
}

/** `a`, or `a and b`, for an error naming flags. */
function flagList(flags: string[]): string {
  return flags.length === 1 ? flags[0]! : `${flags.slice(0, -1).join(', ')} and ${flags.at(-1)}`
}

interface Checked {
  identity?: string
  forMs?: number
  reason?: string
  rows?: number
}

/** Every usage check of a control command, before any connection. */
function check(command: ControlCommand, args: string[], values: ControlFlags): Checked {
  const stray: string[] = []
  if (values.window) stray.push('--window')
  if (values.algorithm) stray.push('--algorithm')
  if (values.burst) stray.push('--burst')
  if (values.policy?.length) stray.push('--policy')
  if (values.limit !== undefined && command !== 'blocks') stray.push('--limit')
  if (stray.length > 0)
    throw new CliError(
      `${command}: ${flagList(stray)} ${stray.length === 1 ? 'does' : 'do'} not apply (an entry holds for every policy of the prefix)`,
      2,
    )
  if (values.for !== undefined && command !== 'block' && command !== 'allow')
    throw new CliError(`--for goes with block and allow`, 2)
  if (values.reason !== undefined && command !== 'block') throw new CliError('--reason goes with block', 2)
  if (command === 'blocks') {
    if (args.length > 0) throw new CliError(`blocks: unexpected argument '${args[0]}'`, 2)
    let rows = MAX_LISTED
    if (values.limit !== undefined) {
      if (!/^\d+$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > MAX_LISTED)
        throw new CliError(`--limit ${values.limit}: expected how many blocks, from 1 to ${MAX_LISTED}`, 2)
      rows = Number(values.limit)
    }
    return { rows }
  }
  if (args.length === 0)
    throw new CliError(
      `${command}: give an identity, e.g. tollgate ${command} 203.0.113.9${command === 'block' || command === 'allow' ? ' --for 1h' : ''}`,
      2,
    )
  if (args.length > 1)
    throw new CliError(`${command}: one identity per call (unexpected argument '${args[1]}')`, 2)
  const identity = checkIdentity(args[0], command)
  if (command === 'block')
    return { identity, forMs: parseFor(values.for, '--for'), reason: checkReason(values.reason, '--reason') }
  if (command === 'allow') return { identity, forMs: parseFor(values.for, '--for') }
  return { identity }
}

/** `tollgate block | unblock | blocks | allow | unallow`: resolves to the exit code. */
export async function control(
  command: ControlCommand,
  args: string[],
  values: ControlFlags,
  io: Io,
): Promise<number> {
  const checked = check(command, args, values)
  // a config names the prefix (and is checked); its policies do not matter to an entry
  const description =
    values.config === undefined ? undefined : await describe({ config: values.config, prefix: values.prefix })
  const prefix = description?.prefix ?? values.prefix ?? 'tollgate'
  const redis = await connect(values)
  try {
    const limiter = await controlLimiter(redis, prefix)
    return await runControl(command, checked, { limiter, redis, prefix, json: values.json === true, io })
  } catch (error) {
    // the CLI checks what the core checks: an InputError here is still the caller's input
    if (error instanceof InputError) throw new CliError(error.message, 2)
    throw error
  } finally {
    await redis.close()
  }
}

interface Run {
  limiter: RateLimiter
  redis: Connection
  prefix: string
  json: boolean
  io: Io
}

/** Text for a terminal: control characters (an escape sequence in an identity or reason) shown escaped. */
export function printable(text: string): string {
  return text.replace(/\p{Cc}/gu, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
}

function quoted(identity: string): string {
  return `'${printable(identity)}'`
}

async function runControl(command: ControlCommand, c: Checked, r: Run): Promise<number> {
  const { limiter, prefix, io } = r
  const out = (doc: object, text: string) => io.out(r.json ? JSON.stringify({ prefix, ...doc }) : text)
  const identity = c.identity as string
  switch (command) {
    case 'block': {
      await limiter.block(identity, { for: c.forMs!, reason: c.reason! })
      out(
        { identity, blocked: true, forMs: c.forMs, reason: c.reason },
        `blocked ${quoted(identity)} for ${formatDuration(c.forMs!)} under prefix '${prefix}'${c.reason ? ` (${printable(c.reason)})` : ''}`,
      )
      return 0
    }
    case 'unblock': {
      const wasBlocked = await unblock(limiter, identity)
      out(
        { identity, blocked: false, ...(wasBlocked === undefined ? {} : { wasBlocked }) },
        wasBlocked === false
          ? `${quoted(identity)} was not blocked under prefix '${prefix}': nothing to unblock`
          : `unblocked ${quoted(identity)} under prefix '${prefix}'`,
      )
      if (wasBlocked === false) await warnUnknownPrefix(r, io)
      return 0
    }
    case 'allow': {
      await limiter.allow(identity, { for: c.forMs! })
      out(
        { identity, allowed: true, forMs: c.forMs },
        `allowed ${quoted(identity)} for ${formatDuration(c.forMs!)} under prefix '${prefix}' (admitted without spending)`,
      )
      return 0
    }
    case 'unallow': {
      await limiter.unallow(identity)
      out(
        { identity, allowed: false },
        `ended any allow entry of ${quoted(identity)} under prefix '${prefix}'`,
      )
      return 0
    }
    case 'blocks': {
      const blocks = await listBlocks(limiter, c.rows!)
      if (r.json) io.out(JSON.stringify({ prefix, blocks }))
      else if (blocks.length === 0) io.out(`no blocks under prefix '${prefix}'`)
      else
        for (const line of table(
          ['IDENTITY', 'EXPIRES-IN', 'REASON'],
          blocks.map((b) => [
            printable(b.identity),
            formatDuration(b.expiresInMs),
            printable(b.reason) || '-',
          ]),
        ))
          io.out(line)
      if (blocks.length === 0) await warnUnknownPrefix(r, io)
      return 0
    }
  }
}

/**
 * Ends a block; resolves to whether there was one, from the index of live blocks, so a mistyped identity
 * is noticed (undefined when the index holds more blocks than one listing returns).
 */
export async function unblock(limiter: RateLimiter, identity: string): Promise<boolean | undefined> {
  const listed = await limiter.blocks({ limit: MAX_LISTED })
  const wasBlocked = listed.some((b) => b.identity === identity)
    ? true
    : listed.length < MAX_LISTED
      ? false
      : undefined
  await limiter.unblock(identity)
  return wasBlocked
}

/** The live blocks, at most `rows`, by identity (the index has no order of its own). */
export async function listBlocks(limiter: RateLimiter, rows: number) {
  const blocks = await limiter.blocks({ limit: rows })
  return blocks.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0))
}
