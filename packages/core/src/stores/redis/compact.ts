/**
 * `storage: 'compact'`: the fixed-window and sliding-window counters of many identities as fields of a
 * few thousand hashes (lua/includes/compact.lua), small enough for Redis' listpack encoding, instead of one
 * key per identity. The store rewrites those pairs before they go out; every other algorithm keeps its
 * key.
 *
 * Where an identity goes is a keyed hash (SipHash-2-4 under the store's `secret`) of its tag, the part of
 * its key between braces, so a client cannot choose its bucket or another identity's field, and every
 * process with the same secret puts it in the same place. A store given no secret uses one kept in Redis
 * per prefix (secret.lua), read before that prefix's first placement. Its entry becomes
 * `<prefix>:{~h:c<bucket>}<suffix>!<field>`: the bucket is the hash tag (all of one identity's policies
 * share a slot, the buckets spread over the cluster's slots), `<prefix>:{~h:c<bucket>}<suffix>` is the
 * first level (wire.ts adds `!2`, `!3`), and the whole name is the base of its penalty key and refund
 * markers. `~h:c` never comes out of identityTag (keys.ts), which hashes any identity starting with `~h:`.
 * @module
 */
import { COMPACT_CODES } from '../../algorithms'
import { ConfigError, StoreError } from '../../errors'
import { sha256, sipHash24 } from '../../hash'
import { compactSecretKey, controlKeyOf } from '../../keys'
import type { StoreEntry } from '../../types'
import { type CompactEntry, compactTwin, FIELD_CHARS } from './wire'

/** `new RedisStore(client, { storage })`. */
export type Storage = 'keys' | 'compact'

/**
 * Buckets per policy. Fewer put more identities in each (less memory per identity, a longer scan per
 * lookup). 8,192 keep a million identities per window in first levels (about 122 fields each, well
 * under 256), so a lookup is one short scan of one hash; two levels of 256 hold four million.
 */
export const BUCKETS = 8192
/** log2(BUCKETS): the hash's low bits that pick the bucket. */
const BUCKET_BITS = 13

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
const encoder = new TextEncoder()
/**
 * Entries remembered per store: a pair seen again (most are: that is why they are limited) costs a
 * lookup by its identity, not a hash, four strings and an object. Two generations of up to this many:
 * new entries go to the newer; when it fills, it becomes the older and the older is dropped (no per-key
 * eviction: deleting a Map's oldest keys one by one leaves holes its iterator walks again). An entry
 * found in the older is used there, not copied to the newer: a working set near this size would
 * otherwise copy every entry, every time round.
 */
const REMEMBERED = 10_000

/**
 * How often a store checks again that a prefix's fingerprint in Redis is its own (a check that finds
 * another secret's stops that prefix's calls until one finds its own again), or reads again the secret
 * kept there (one written after a flush by a process that had none is adopted); and how long a
 * fingerprint lives past the last check of any process (a kept secret has no expiry).
 */
export const SECRET_RECHECK_MS = 60_000
export const SECRET_TTL_MS = 600_000

/**
 * The fixed text whose keyed hash under the secret is the secret's fingerprint. It names this placement:
 * a layout that puts identities elsewhere must fingerprint another text, so stores on two layouts
 * refuse each other as stores with two secrets do, rather than count apart.
 */
const FINGERPRINTED = encoder.encode('tollgate:compact-secret:8192')

/**
 * Runs fingerprint.lua (a store given `secret`: `value` is its fingerprint) or secret.lua (a secret kept in
 * Redis: `value` is the store's proposal) on a prefix's key: resolves to the value Redis holds.
 */
export type SecretCheck = (key: string, value: string) => Promise<unknown>

/**
 * A secret kept in Redis: 32 random bytes in base64url. A fingerprint is 16 hex characters: never one. A
 * later layout keeps its secret in another form, refused here as any other value is (and this form names
 * this layout to it), so two layouts on one prefix refuse each other rather than count apart.
 */
const KEPT = /^[A-Za-z0-9_-]{43}$/

/**
 * The secret that places a prefix's identities under `storage: 'compact'` when its stores were given
 * none, from what Redis holds at `<prefix>:{~h:s}` (`GET`); undefined for anything else (nothing, or the
 * fingerprint of a configured `secret`, which places nothing). For tools that read compact counters.
 *
 * @example
 * keptCompactSecret(await redis.get('api:{~h:s}')) // a 43-character secret, or undefined
 */
export function keptCompactSecret(held: unknown): string | undefined {
  return typeof held === 'string' && KEPT.test(held) ? held : undefined
}

/** A new secret to propose for a prefix: 32 bytes of the platform's CSPRNG, base64url (43 characters). */
function freshSecret(): string {
  const bytes = new Uint8Array(33) // the 33rd stays 0: ten 3-byte groups and a last one of two
  globalThis.crypto.getRandomValues(bytes.subarray(0, 32))
  let text = ''
  for (let i = 0; i < 33; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
    text += B64[(n >>> 18) & 63]! + B64[(n >>> 12) & 63]! + B64[(n >>> 6) & 63]! + B64[n & 63]!
  }
  return text.slice(0, 43)
}

/** The SipHash key of a secret: the first 16 bytes of its SHA-256, as four little-endian words. */
function hashKey(secret: string): Uint32Array {
  const digest = sha256(secret)
  const key = new Uint32Array(4)
  for (let i = 0; i < 4; i++) {
    key[i] =
      (digest[4 * i]! |
        (digest[4 * i + 1]! << 8) |
        (digest[4 * i + 2]! << 16) |
        (digest[4 * i + 3]! << 24)) >>>
      0
  }
  return key
}

/**
 * Where a prefix stands with the secret: due for a check at `due` (Date.now() ms), `pending` while one
 * runs, `known` once one has answered (a secret kept in Redis: once one has given a secret to place by),
 * `error` while the last answer was another secret's. It travels on every entry placed for the prefix, so
 * it never holds the secret (an entry may end up in a log).
 */
interface PrefixSecret {
  readonly prefix: string
  readonly key: string
  due: number
  known: boolean
  pending: Promise<void> | undefined
  error: StoreError | undefined
  /** Why the last check had no answer. */
  failure: unknown
}

/** Whether the layout moves a pair into a bucket: the algorithms with a compact twin do (not calendar windows). */
function isCompactable(e: StoreEntry): boolean {
  // a calendar window keeps a key of its own: its expiry is its period's end, not a bucket's
  if (e.policy.calendar) return false
  return COMPACT_CODES[e.policy.algorithm as keyof typeof COMPACT_CODES] !== undefined
}

/**
 * A pair of a prefix whose kept secret is not known yet: not placed, never sent (verify waits for the
 * prefix's first read, then places it).
 */
interface Unplaced extends StoreEntry {
  readonly secret: PrefixSecret
  readonly unplaced: true
}

/** Whether `map` left `e` unplaced. */
export function isUnplaced(e: StoreEntry): boolean {
  return (e as Partial<Unplaced>).unplaced === true
}

/** Where a pair key goes: its entry's key, its bucket's levels, its field and its control key. */
interface Placement {
  readonly secret: PrefixSecret
  readonly key: string
  readonly levels: readonly [string, string, string]
  readonly field: string
  readonly control: string
}

/**
 * A remembered entry, found by its identity (a short string, cheap to hash) rather than by its pair key
 * (built per call by concatenation, which a Map lookup would first have to copy flat). `origin` and
 * `source` tell it from the identity's other pairs: each policy of a limiter, or another limiter's;
 * `by`, the key builder, spares comparing the pair key itself (which would copy it flat too).
 */
interface Remembered extends CompactEntry {
  readonly secret: PrefixSecret
  readonly source: string
  readonly origin: StoreEntry['policy']
  readonly by: object | undefined
}

/**
 * What an identity maps to: its one pair's entry, or, once it has several, each policy's. An entry is
 * kept as the one-element array a call of that pair alone is mapped to, so such a call (the common
 * one) allocates nothing here.
 */
type One = readonly [Remembered]
type Slot = One | Map<StoreEntry['policy'], One>

/** The remembered entry of `e` in `map`, if it is there. */
function lookup(map: Map<string, Slot>, id: string, e: StoreEntry): One | undefined {
  const slot = map.get(id)
  if (slot === undefined) return undefined
  const one = slot instanceof Map ? slot.get(e.policy) : slot
  if (one === undefined) return undefined
  const r = one[0]
  if (r.origin !== e.policy) return undefined
  return (r.by !== undefined && r.by === e.builder) || r.source === e.key ? one : undefined
}

export class CompactLayout {
  /** The configured secret's hash key; undefined when the secrets are kept in Redis. */
  private readonly key: Uint32Array | undefined
  /**
   * Secrets kept in Redis: each prefix's secret and hash key once read. Held here, off the PrefixSecret
   * every entry carries.
   */
  private readonly kept: Map<PrefixSecret, { readonly secret: string; readonly key: Uint32Array }> | undefined
  /** Reused for every identity: its UTF-8 bytes, and the hash. */
  private readonly bytes = new Uint8Array(4 * 1024)
  private readonly out = new Uint32Array(2)
  /**
   * Each bucket's levels, shared by the entries placed in it: a few thousand strings, not three per
   * identity. Dropped whole when it holds more than a few limiters' worth.
   */
  private levels = new Map<string, readonly [string, string, string]>()
  private placed = new Map<string, Slot>()
  private older = new Map<string, Slot>()
  private count = 0
  /** The secret's fingerprint (fingerprint.lua); undefined when the secrets are kept in Redis. */
  readonly fingerprint: string | undefined
  private readonly prefixes = new Map<string, PrefixSecret>()
  private warned = new Set<string>()

  /**
   * `secret` undefined: each prefix's secret is kept in Redis (secret.lua). `cluster`: an identity's
   * control key is in another slot than its bucket, so its pairs read the copy in the bucket's slot.
   */
  constructor(
    secret: unknown,
    private readonly cluster = false,
  ) {
    if (secret === undefined) {
      this.key = undefined
      this.fingerprint = undefined
      this.kept = new Map()
      return
    }
    if (typeof secret !== 'string' || secret.length < 16) {
      throw new ConfigError(
        'secret',
        "a string of at least 16 characters, the same in every process (storage: 'compact' needs it)",
        typeof secret === 'string' ? `${secret.length} characters` : secret,
      )
    }
    this.key = hashKey(secret)
    this.kept = undefined
    sipHash24(this.key, FINGERPRINTED, FINGERPRINTED.length, this.out)
    this.fingerprint = this.out[0]!.toString(16).padStart(8, '0') + this.out[1]!.toString(16).padStart(8, '0')
  }

  /** Whether each prefix's secret is kept in Redis (secret.lua) rather than configured (fingerprint.lua). */
  get keptInRedis(): boolean {
    return this.kept !== undefined
  }

  /**
   * Undefined when every compact pair of `mapped` (`map(entries)`) may go to Redis now; else a promise of
   * the entries to send once they may (after their prefix's first check, `entries` placed again: a
   * prefix whose secret is kept in Redis is placed only then), or that rejects: Redis holds another
   * secret (or its fingerprint) for their prefix, or the first check failed. Later checks run beside the
   * calls, never in their way.
   */
  verify(
    entries: readonly StoreEntry[],
    mapped: readonly StoreEntry[],
    check: SecretCheck,
  ): Promise<readonly StoreEntry[]> | undefined {
    let now = 0
    for (let i = 0; i < mapped.length; i++) {
      const p = (mapped[i] as Partial<Remembered>).secret
      if (p === undefined) continue
      if (now === 0) now = Date.now()
      if (p.pending === undefined && now >= p.due) p.pending = this.recheck(p, check)
      if (p.error !== undefined) return Promise.reject(p.error)
      if (!p.known && p.pending !== undefined) {
        return p.pending.then(() => {
          if (p.error !== undefined) throw p.error
          if (!p.known) throw p.failure
          const again = this.map(entries)
          return this.verify(entries, again, check) ?? again
        })
      }
    }
    return undefined
  }

  /** One check of a prefix's fingerprint or kept secret; never rejects (its outcome is left on `p`). */
  private async recheck(p: PrefixSecret, check: SecretCheck): Promise<void> {
    try {
      if (this.kept !== undefined) {
        await this.reread(p, this.kept, check)
        return
      }
      const fingerprint = this.fingerprint!
      const held = String(await check(p.key, fingerprint))
      p.known = true
      p.due = Date.now() + SECRET_RECHECK_MS
      p.error =
        held === fingerprint ? undefined : this.mismatch(p, keptCompactSecret(held) ? 'kept' : 'other')
    } catch (error) {
      // Redis did not answer: the next call checks again (and, before a first answer, waits on it)
      p.due = 0
      p.failure = error
    } finally {
      p.pending = undefined
    }
  }

  /**
   * One read of a prefix's kept secret. It proposes the secret the store already uses (a fresh one before
   * it has any), so after a flush or an eviction the first store to read writes back the one every
   * process uses; another secret held (written by a process that read after a flush, before any other)
   * is adopted, and the remembered placements, made under the old one, dropped.
   */
  private async reread(
    p: PrefixSecret,
    kept: NonNullable<CompactLayout['kept']>,
    check: SecretCheck,
  ): Promise<void> {
    const had = kept.get(p)
    const held = String(await check(p.key, had?.secret ?? freshSecret()))
    p.due = Date.now() + SECRET_RECHECK_MS
    if (keptCompactSecret(held) === undefined) {
      p.error = this.mismatch(p, 'configured')
      return
    }
    if (had?.secret !== held) {
      kept.set(p, { secret: held, key: hashKey(held) })
      if (had !== undefined) this.forget()
    }
    p.known = true
    p.error = undefined
  }

  /** Drops every remembered placement: the next call of each pair places it again. */
  private forget(): void {
    this.placed = new Map()
    this.older = new Map()
    this.count = 0
  }

  /**
   * The refusal of a prefix whose key holds what this store cannot place by: `other`, another secret's
   * fingerprint; `kept`, a secret kept in Redis by stores given none; `configured`, the fingerprint of a
   * store given `secret`, found by a store given none. Never includes what the key holds.
   */
  private mismatch(p: PrefixSecret, held: 'other' | 'kept' | 'configured'): StoreError {
    const found =
      held === 'other'
        ? "another secret's fingerprint"
        : held === 'kept'
          ? "a secret kept there by stores given no `secret`, and this store's is configured"
          : 'the fingerprint of a configured `secret`, and this store has none'
    const error = new StoreError(
      `storage: 'compact' on prefix '${p.prefix}': Redis holds ${found} (key ${p.key}), so processes ` +
        'placing identities by different secrets would each grant every identity its limit. Give every ' +
        'process on this prefix the same secret, or none (then it is kept in Redis); to change it, see ' +
        'docs/storage.md',
    )
    if (!this.warned.has(p.prefix)) {
      this.warned.add(p.prefix)
      console.warn(`[tollgate] ERR_TOLLGATE_COMPACT_SECRET: ${error.message}`)
    }
    return error
  }

  /**
   * The entries as this layout stores them: fixed-window and sliding-window pairs in their buckets; a pair
   * whose prefix's kept secret is not read yet is left unplaced, for `verify` to wait on.
   */
  map(entries: readonly StoreEntry[]): readonly StoreEntry[] {
    if (entries.length === 1) return isCompactable(entries[0]!) ? this.entry(entries[0]!) : entries
    let mapped: StoreEntry[] | undefined
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!
      if (!isCompactable(e)) continue
      mapped ??= entries.slice()
      mapped[i] = this.entry(e)[0]
    }
    return mapped ?? entries
  }

  private entry(e: StoreEntry): readonly [StoreEntry] {
    // by identity when there is one (every limiter's entry has it), else by the pair key itself
    const id = e.identity ?? e.key
    const hit = lookup(this.placed, id, e) ?? lookup(this.older, id, e)
    if (hit !== undefined) return hit
    const placement = this.place(e.key)
    // its prefix's kept secret is not known yet: verify waits for it, then this pair is placed
    if (placement.key === undefined) return [{ ...e, secret: placement.secret, unplaced: true } as Unplaced]
    if (this.count >= REMEMBERED) {
      this.older = this.placed
      this.placed = new Map()
      this.count = 0
    }
    const one: One = [this.remember(e, placement)]
    const slot = this.placed.get(id)
    if (slot instanceof Map) slot.set(e.policy, one)
    else if (slot === undefined || slot[0].origin === e.policy) this.placed.set(id, one)
    else
      this.placed.set(
        id,
        new Map([
          [slot[0].origin, slot],
          [e.policy, one],
        ]),
      )
    this.count++
    return one
  }

  /** A new entry for `e`: its placement, under its policy's compact twin. */
  private remember(e: StoreEntry, p: Placement): Remembered {
    return {
      secret: p.secret,
      policy: compactTwin(e.policy),
      key: p.key,
      identity: e.identity,
      levels: p.levels,
      field: p.field,
      control: p.control,
      whole: false,
      source: e.key,
      origin: e.policy,
      by: e.builder,
    }
  }

  /**
   * On a cluster, the copy of an identity's control key (`<prefix>:{<tag>}:~c`) its compact pairs read
   * ({@link controlCopyKey}), once its prefix's secret is known (a kept one is read first).
   */
  async controlCopy(key: string, check: SecretCheck): Promise<string> {
    const open = key.indexOf(':{')
    const close = key.indexOf('}', open + 2)
    const prefix = key.slice(0, open)
    const p = this.prefixSecret(prefix)
    if (this.kept !== undefined && !this.kept.has(p)) {
      p.pending ??= this.recheck(p, check)
      await p.pending
      if (p.error !== undefined) throw p.error
      if (!this.kept.has(p)) throw p.failure
    }
    const { bucket, field } = this.spot(key, open + 2, close, this.key ?? this.kept!.get(p)!.key)
    return controlCopyKey(prefix, bucket, field)
  }

  /** A prefix's standing with the secret, made on first use. */
  private prefixSecret(prefix: string): PrefixSecret {
    let secret = this.prefixes.get(prefix)
    if (secret === undefined) {
      secret = {
        prefix,
        key: compactSecretKey(prefix),
        due: 0,
        known: false,
        pending: undefined,
        error: undefined,
        failure: undefined,
      }
      this.prefixes.set(prefix, secret)
    }
    return secret
  }

  /** The placement of a pair key, or only its prefix's standing while its kept secret is not known. */
  private place(key: string): Placement | { readonly secret: PrefixSecret; readonly key: undefined } {
    const open = key.indexOf(':{')
    const close = key.indexOf('}', open + 2)
    const prefix = key.slice(0, open)
    const secret = this.prefixSecret(prefix)
    const hash = this.kept === undefined ? this.key : this.kept.get(secret)?.key
    if (hash === undefined) return { secret, key: undefined }
    const { bucket, field } = this.spot(key, open + 2, close, hash)
    const name = `${prefix}:{~h:c${bucket}}${key.slice(close + 1)}`
    let levels = this.levels.get(name)
    if (levels === undefined) {
      if (this.levels.size >= 8 * BUCKETS) this.levels = new Map()
      levels = [name, `${name}!2`, `${name}!3`]
      this.levels.set(name, levels)
    }
    const control = this.cluster ? controlCopyKey(prefix, bucket, field) : controlKeyOf(key)
    return { secret, key: `${levels[0]}!${field}`, levels, field, control }
  }

  /** The bucket and field of the identity tag `text.slice(from, to)` under a secret's hash key. */
  spot(text: string, from: number, to: number, key = this.key!): CompactSpot {
    const { bytes, out } = this
    // the tag's UTF-8 bytes: ASCII (the common case) copied as is, anything else through the encoder
    let length = to - from
    let ascii = true
    for (let i = 0; i < length; i++) {
      const c = text.charCodeAt(from + i)
      if (c > 0x7f) {
        ascii = false
        break
      }
      bytes[i] = c
    }
    if (!ascii) length = encoder.encodeInto(text.slice(from, to), bytes).written
    sipHash24(key, bytes, length, out)
    const bucket = out[1]! & (BUCKETS - 1)
    // the field: the other 51 bits (bucket bits would be the same for every field of a bucket)
    let n = out[0]! * 2 ** (32 - BUCKET_BITS) + (out[1]! >>> BUCKET_BITS)
    let field = ''
    for (let i = 0; i < FIELD_CHARS; i++) {
      field += B64[n % 64]
      n = Math.floor(n / 64)
    }
    return { bucket, field }
  }
}

/**
 * On a cluster, the copy of an identity's control key (block, allow and override entries) that its
 * compact pairs read, in its bucket's slot: the identity's own key is in another slot.
 */
export function controlCopyKey(prefix: string, bucket: number, field: string): string {
  return `${prefix}:{~h:c${bucket}}:~c!${field}`
}

/** Where `storage: 'compact'` keeps an identity: its bucket (0 to 8,191) and its field in it. */
export interface CompactSpot {
  readonly bucket: number
  readonly field: string
}

/**
 * The bucket and field `storage: 'compact'` with `secret` gives an identity tag (`identityTag(identity)`):
 * its pairs are field `field` of `<prefix>:{~h:c<bucket>}<suffix>` (or of the levels after it, `!2`, `!3`).
 * For tools that read compact counters; docs/scripts.md gives the layout. A store given no `secret` keeps
 * one per prefix in Redis: pass `keptCompactSecret` of `GET <prefix>:{~h:s}`.
 *
 * @example
 * compactSpot('the-store-secret-1234', identityTag('ip:203.0.113.9')) // { bucket: 6417, field: 't_ttlz-hF' }
 */
export function compactSpot(secret: string, tag: string): CompactSpot {
  // `?? null`: undefined would mean a secret kept in Redis; here it is refused as any non-secret is
  return new CompactLayout(secret ?? null).spot(tag, 0, tag.length)
}
