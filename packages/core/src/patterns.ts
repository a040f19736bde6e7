/**
 * Pattern overrides: `overrides.set('tenant:acme:*', limits)` applies to every identity that starts with
 * `tenant:acme:`. A prefix's patterns live in one Redis hash; each process holds a copy and matches
 * identities itself (the longest pattern wins; an identity's own override wins over any pattern), and
 * sends the matched pattern's value with the call, with its copy's version. The scripts compare it with
 * the version key (lua/includes/pattern.lua): a process that missed a change reloads and sends the call
 * again, so every process applies a change on its next call.
 * @module
 */
import { InputError } from './errors'
import { checkIdentity } from './keys'
import { crc16, SLOTS } from './stores/redis/cluster-slot'

/** The most patterns one prefix holds (set refuses more). */
export const MAX_PATTERNS = 1000

/** Whether an identity given to `overrides` is a pattern: it ends with `*`. */
export function isPattern(identity: unknown): identity is string {
  return typeof identity === 'string' && identity.endsWith('*')
}

/** A pattern's prefix (`tenant:acme:` of `tenant:acme:*`), or an InputError. */
export function patternPrefix(pattern: string, argument: string): string {
  const prefix = pattern.slice(0, -1)
  if (prefix.length === 0 || prefix.includes('*')) {
    throw new InputError(argument, "a prefix and one trailing '*', like 'tenant:acme:*'", pattern)
  }
  return checkIdentity(prefix, argument)
}

/** The hash of a prefix's patterns: pattern prefix -> '<end_ms>|<overrides>'. */
export function patternTableKey(prefix: string): string {
  return `${prefix}:{~c}:patterns`
}

/** The counter of a prefix's pattern changes: its version, and on one server the version key. */
export function patternCounterKey(prefix: string): string {
  return `${prefix}:{~c}:pver`
}

let slotTags: string[] | undefined

/** A hash tag for each cluster slot (found once, by trying short strings): the slots' version keys. */
function tagOfSlot(slot: number): string {
  if (slotTags === undefined) {
    const tags = new Array<string>(SLOTS)
    let left = SLOTS
    for (let i = 0; left > 0; i++) {
      const tag = `~p${i.toString(36)}`
      const s = crc16(tag) & (SLOTS - 1)
      if (tags[s] === undefined) {
        tags[s] = tag
        left--
      }
    }
    slotTags = tags
  }
  return slotTags[slot]!
}

/** A slot's copy of a prefix's version, on a cluster: `<prefix>:{<tag of the slot>}:~pv`. */
export function slotVersionKey(prefix: string, slot: number): string {
  return `${prefix}:{${tagOfSlot(slot)}}:~pv`
}

/**
 * One prefix's patterns as this process last read them. `match` costs a map lookup per distinct
 * pattern length, and nothing while the prefix has no pattern.
 */
export class PatternTable {
  version = 0
  /** The call tail with no match: `~<version>`. */
  bare = '~0'
  /** Each pattern's stored value and its end (epoch ms, 0: none). */
  private byPrefix = new Map<string, { value: string; ends: number }>()
  /** The patterns' lengths, longest first. */
  private lengths: number[] = []
  /** A load under way, shared by the calls that found the table stale together. */
  loading: Promise<void> | undefined
  /** The version key of each slot on a cluster (built as slots are met). */
  readonly slotKeys: (string | undefined)[] = []

  constructor(
    readonly prefix: string,
    readonly tableKey = patternTableKey(prefix),
    readonly counterKey = patternCounterKey(prefix),
  ) {}

  get empty(): boolean {
    return this.lengths.length === 0
  }

  /** Replaces the table: `entries` are [pattern prefix, stored value]. */
  load(version: number, entries: readonly (readonly [string, string])[]): void {
    this.version = version
    this.bare = `~${version}`
    this.byPrefix = new Map(entries.map(([p, value]) => [p, { value, ends: Number.parseInt(value, 10) }]))
    this.lengths = [...new Set(entries.map(([p]) => p.length))].sort((a, b) => b - a)
  }

  /**
   * The stored value of the longest live pattern `identity` starts with, or ''. A pattern that ended
   * (by this process's clock) gives way to a shorter one; the script checks the end on Redis' clock.
   */
  match(identity: string): string {
    let now = 0
    for (const n of this.lengths) {
      if (n > identity.length) continue
      const v = this.byPrefix.get(identity.slice(0, n))
      if (v === undefined) continue
      if (v.ends === 0) return v.value
      if (now === 0) now = Date.now()
      if (v.ends > now) return v.value
    }
    return ''
  }

  /** The version key of a call whose keys are in `slot` (cluster), or the counter (one server). */
  versionKey(slot: number | undefined): string {
    if (slot === undefined) return this.counterKey
    let key = this.slotKeys[slot]
    if (key === undefined) {
      key = slotVersionKey(this.prefix, slot)
      this.slotKeys[slot] = key
    }
    return key
  }
}

/** The prefix of a pair key (`<prefix>:{<tag>}...`). */
export function prefixOfKey(key: string): string {
  return key.slice(0, key.indexOf(':{'))
}
