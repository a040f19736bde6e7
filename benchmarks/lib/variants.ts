/**
 * What the core benchmark compares: Tollgate's `RateLimiter.consume()` (five algorithms, node-redis v6 and
 * ioredis) against rate-limiter-flexible's `RateLimiterRedis.consume()` on the same clients, keys and
 * concurrency. Each variant turns into an {@link Op} for {@link measure}.
 * @module
 */
import { type Algorithm, RateLimiter, RedisStore } from '@tollgate/core'
import type { Redis as IORedis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { type Op, outcomeOf } from './measure'

/**
 * `node-redis-nt`: node-redis with `commandOptions: { timeout: 0 }`. node-redis 6 gives every command a
 * 5 s timeout by default, which costs an `AbortSignal.timeout()` plus listeners per command.
 */
export type ClientName = 'node-redis' | 'node-redis-nt' | 'ioredis'
/** `hot`: one key for every call; `10k`: 10,000 keys round-robin; `hot-refused`: one key far over its limit. */
export type KeyMode = 'hot' | '10k' | 'hot-refused'

export interface Clients {
  /** A connected node-redis v6 client (RESP3, its default). */
  readonly 'node-redis': unknown
  /** The same with `commandOptions: { timeout: 0 }` (no per-command timeout). */
  readonly 'node-redis-nt': unknown
  /** A connected ioredis client. */
  readonly ioredis: IORedis
}

export interface Variant {
  /** Unique, also the key prefix. */
  readonly id: string
  readonly lib: 'tollgate' | 'rate-limiter-flexible'
  readonly client: ClientName
  /** Tollgate's algorithm; rate-limiter-flexible's Redis limiter is a fixed window (INCR + EXPIRE). */
  readonly algorithm: Algorithm | 'fixed-window (rlf)'
  readonly keys: KeyMode
  /** Tollgate with `denyCache: false` (every refusal goes to Redis). */
  readonly noDenyCache?: boolean
  /** rate-limiter-flexible with `inMemoryBlockOnConsumed: points` (its counterpart of the deny cache). */
  readonly inMemoryBlock?: boolean
  /** Tollgate with `new RedisStore(client, { batch: false })`: every call its own script. */
  readonly noBatch?: boolean
  /** Tollgate with `reserve` (units taken per store call), under {@link RESERVE_LIMIT}. */
  readonly reserve?: number
  /** Tollgate with `new RedisStore(client, { storage: 'compact', secret })` (docs/storage.md). */
  readonly compact?: boolean
}

/** The store options of a compact variant. */
const COMPACT = { storage: 'compact', secret: 'benchmark-secret-0123' } as const

/** Limit of the admitted runs: high enough that a minute of benchmarking never reaches it. */
export const HIGH_LIMIT = 1_000_000
/** Limit of the `hot-refused` runs: everything after the first 100 calls is refused. */
export const LOW_LIMIT = 100
export const WINDOW_S = 60
/**
 * sliding-log keeps one member per unit and caps `limit` at 10,000 (MAX_LOG_LIMIT), so its admitted runs
 * use 10,000 per 60 s on 10k keys (no key gets near it) and 10,000 per 100 ms on the hot key (admits up
 * to 100k/s, so the log holds a few thousand members).
 */
export const LOG_LIMIT = 10_000
export const LOG_HOT_WINDOW_MS = 100
export const KEYSPACE = 10_000
/**
 * Limit of the `reserve` runs: a process admitting from its own units decides far faster than a round
 * trip, so the admitted runs' limit would run out within the benchmark; this one does not.
 */
export const RESERVE_LIMIT = 50_000_000
/** The reserves measured: units per store call (the first one's variant ids carry no number). */
export const RESERVES = [100, 1000] as const

export const ALGORITHMS: readonly Algorithm[] = [
  'sliding-window',
  'fixed-window',
  'sliding-log',
  'token-bucket',
  'gcra',
]

const KEYS = Array.from({ length: KEYSPACE }, (_, n) => `user:${n}`)

function keyOf(mode: KeyMode): (i: number) => string {
  if (mode === '10k') return (i) => KEYS[i % KEYSPACE]!
  const hot = mode === 'hot' ? 'user:hot' : 'user:hot-refused'
  return () => hot
}

/** The policy a variant runs with (the ceiling uses the same one). */
export function policyOf(algorithm: string, mode: KeyMode): { limit: number; windowMs: number } {
  if (mode === 'hot-refused') return { limit: LOW_LIMIT, windowMs: WINDOW_S * 1000 }
  if (algorithm === 'sliding-log')
    return { limit: LOG_LIMIT, windowMs: mode === 'hot' ? LOG_HOT_WINDOW_MS : WINDOW_S * 1000 }
  return { limit: HIGH_LIMIT, windowMs: WINDOW_S * 1000 }
}

/** Human name of a variant for the tables. */
export function label(v: Variant): string {
  const who = v.lib === 'tollgate' ? `Tollgate ${v.algorithm}` : 'rate-limiter-flexible'
  const client = v.client === 'node-redis-nt' ? 'node-redis, no cmd timeout' : v.client
  const extra = [
    v.noDenyCache ? ', denyCache: false' : v.inMemoryBlock ? ', inMemoryBlockOnConsumed' : '',
    v.noBatch ? ', batch: false' : '',
    v.reserve ? `, reserve: ${v.reserve}` : '',
    v.compact ? ', storage: compact' : '',
  ].join('')
  return `${who} (${client}${extra})`
}

/**
 * Builds the call for a variant. `prefix` separates runs that must not share state (e.g. the smoke
 * test); the benchmark uses the variant id so rounds of one variant share keys (steady state).
 */
export function makeOp(v: Variant, clients: Clients, prefix = `b-${v.id}`): Op {
  const key = keyOf(v.keys)
  const { limit, windowMs } = policyOf(v.algorithm, v.keys)
  const client = clients[v.client]
  if (v.lib === 'tollgate') {
    const limiter = new RateLimiter({
      store: new RedisStore(client, {
        ...(v.noBatch ? { batch: false } : {}),
        ...(v.compact ? COMPACT : {}),
      }),
      prefix,
      limit: v.reserve ? RESERVE_LIMIT : limit,
      window: windowMs,
      ...(v.reserve ? { reserve: v.reserve } : {}),
      algorithm: v.algorithm as Algorithm,
      // The default deadline is 500 ms, past which the default store-error policy admits without Redis.
      // On this 2-core shared machine a stall can pass that with 256 calls queued, and a run then
      // measures the fail-open path; 5 s (node-redis' own default) keeps the store path measured.
      // Fallbacks are still counted, and flagged in the table.
      timeoutMs: 5_000,
      ...(v.noDenyCache ? { denyCache: false as const } : {}),
    })
    return (i) => limiter.consume(key(i)).then(outcomeOf)
  }
  const rlf = new RateLimiterRedis({
    storeClient: client,
    useRedisPackage: v.client !== 'ioredis',
    points: limit,
    duration: windowMs / 1000,
    keyPrefix: prefix,
    ...(v.inMemoryBlock ? { inMemoryBlockOnConsumed: limit } : {}),
  })
  // A refusal rejects with a RateLimiterRes (not an Error): count it as a decision.
  return (i) =>
    rlf.consume(key(i)).then(
      () => 'admitted',
      (e: unknown) => {
        if (e instanceof Error) throw e
        return 'refused'
      },
    )
}

/** Every variant of the benchmark, in run order (Tollgate and rate-limiter-flexible interleaved). */
export function allVariants(): Variant[] {
  const out: Variant[] = []
  const tg = (client: ClientName, algorithm: Algorithm, keys: KeyMode): Variant => ({
    id: `tg-${client}-${algorithm}-${keys}`,
    lib: 'tollgate',
    client,
    algorithm,
    keys,
  })
  const rlf = (client: ClientName, keys: KeyMode): Variant => ({
    id: `rlf-${client}-${keys}`,
    lib: 'rate-limiter-flexible',
    client,
    algorithm: 'fixed-window (rlf)',
    keys,
  })
  const unbatched = (v: Variant): Variant => ({ ...v, id: `${v.id}-nb`, noBatch: true })
  const compact = (v: Variant): Variant => ({ ...v, id: `${v.id}-compact`, compact: true })
  for (const keys of ['hot', '10k'] as const) {
    out.push(tg('node-redis', 'sliding-window', keys), rlf('node-redis', keys))
    for (const reserve of RESERVES) {
      out.push({
        ...tg('node-redis', 'sliding-window', keys),
        id:
          reserve === RESERVES[0]
            ? `tg-node-redis-reserve-${keys}`
            : `tg-node-redis-reserve-${reserve}-${keys}`,
        reserve,
      })
    }
    out.push(compact(tg('node-redis', 'sliding-window', keys)))
    out.push(
      compact({
        ...tg('node-redis', 'sliding-window', keys),
        id: `tg-node-redis-reserve-${keys}`,
        reserve: RESERVES[0],
      }),
    )
    out.push(tg('node-redis', 'fixed-window', keys), compact(tg('node-redis', 'fixed-window', keys)))
    out.push(tg('node-redis', 'sliding-log', keys))
    out.push(rlf('ioredis', keys), tg('ioredis', 'sliding-window', keys), tg('ioredis', 'fixed-window', keys))
    out.push(tg('node-redis', 'token-bucket', keys), tg('node-redis', 'gcra', keys))
    out.push(unbatched(tg('node-redis', 'sliding-window', keys)))
    out.push(tg('node-redis-nt', 'sliding-window', keys), rlf('node-redis-nt', keys))
    out.push(compact(tg('node-redis-nt', 'sliding-window', keys)))
    out.push(tg('node-redis-nt', 'fixed-window', keys))
  }
  out.push(tg('node-redis', 'sliding-window', 'hot-refused'), rlf('node-redis', 'hot-refused'))
  out.push({
    ...tg('node-redis', 'sliding-window', 'hot-refused'),
    id: 'tg-node-redis-sliding-window-hot-refused-nc',
    noDenyCache: true,
  })
  out.push({ ...rlf('node-redis', 'hot-refused'), id: 'rlf-node-redis-hot-refused-imb', inMemoryBlock: true })
  return out
}

/** The rate-limiter-flexible variant a Tollgate variant is compared with (same client and keys). */
export function peerOf(v: Variant, all: readonly Variant[]): Variant | undefined {
  // Like for like: Tollgate's deny cache (on by default) against rate-limiter-flexible's in-memory block,
  // and every Redis-only variant against rate-limiter-flexible's default.
  const cached = v.keys === 'hot-refused' && !v.noDenyCache
  return all.find(
    (p) =>
      p.lib === 'rate-limiter-flexible' &&
      p.client === v.client &&
      p.keys === v.keys &&
      !!p.inMemoryBlock === cached,
  )
}
