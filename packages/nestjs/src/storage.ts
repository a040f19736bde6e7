/**
 * `TollgateThrottlerStorage`: a `ThrottlerStorage` for `@nestjs/throttler` backed by a Tollgate store, so
 * `@Throttle()` limits become exact and shared by every replica on one Redis (or Redis Cluster, Valkey).
 * @module
 */
import { HttpException } from '@nestjs/common'
import { type Decision, RateLimiter, type RateLimiterOptions } from '@tollgate/core'
import { unavailableProblem } from '@tollgate/http'

/** The answer `@nestjs/throttler`'s guard expects from `ThrottlerStorage.increment` (times in seconds). */
export interface ThrottlerStorageRecord {
  totalHits: number
  timeToExpire: number
  isBlocked: boolean
  timeToBlockExpire: number
}

/**
 * Options of {@link TollgateThrottlerStorage}: the limiter options that do not describe a policy (each
 * throttler's `ttl`, `limit` and `blockDuration` do that).
 * @example
 * new TollgateThrottlerStorage(store, { prefix: 'orders-api', onStoreError: 'deny' })
 */
export interface TollgateThrottlerStorageOptions
  extends Partial<
    Omit<
      RateLimiterOptions,
      'store' | 'limit' | 'window' | 'policies' | 'burst' | 'penalty' | 'concurrency' | 'lease' | 'name'
    >
  > {
  /**
   * How each throttler counts. `'sliding-log'` is what `@nestjs/throttler`'s own storage does (a hit
   * counts for `ttl` after it was made), exact in every interval, for limits up to 10,000 per `ttl`;
   * `'sliding-window'`, `'fixed-window'`, `'token-bucket'` or `'gcra'` take larger limits.
   * @default 'sliding-log'
   */
  algorithm?: RateLimiterOptions['algorithm']
  /**
   * First part of every key. Each `ttl` / `blockDuration` pair gets `<prefix>:<ttl>:<blockDuration>`.
   * @default 'throttler'
   */
  prefix?: string
}

/** Refused by the failure policy (`onStoreError: 'deny'` while the store is down): a 503, not a 429. */
export class StoreUnavailableException extends HttpException {
  constructor(readonly decision: Decision) {
    super(unavailableProblem(decision.retryAfterMs), 503)
  }
}

/** A throttler's limiter, with the call options of the last limit it was called with (hoisted). */
type Counter = { limiter: RateLimiter; limit: number; call: { limits: number } }
const NAME = /^[A-Za-z0-9_.:-]{1,64}$/

/**
 * A drop-in storage for `@nestjs/throttler`: each `increment` is one atomic script on the Tollgate store,
 * with keys built by the core (every key of one call in one Redis Cluster slot). Every throttler keeps
 * its `ttl`, `limit` and `blockDuration` (milliseconds, as the throttler passes them); `limit` travels
 * with the call, so a limit resolved per request costs no limiter of its own.
 *
 * Blocking: once a throttler refuses a client, the client stays refused for `blockDuration` (which
 * `@nestjs/throttler` defaults to `ttl`) and the refused hits are not counted. When the block ends the
 * client's earlier hits still count until they expire: never more admissions than the in-memory storage.
 *
 * Store down: the limiter's `onStoreError` decides. `'allow'` (the default) admits; `'deny'` throws
 * {@link StoreUnavailableException} (a 503 through Nest's exception filter); `'local'` counts in process.
 *
 * @example
 * import { ThrottlerModule } from '@nestjs/throttler'
 * import { RedisStore } from '@tollgate/core'
 * import { TollgateThrottlerStorage } from '@tollgate/nestjs'
 *
 * ThrottlerModule.forRoot({
 *   throttlers: [{ ttl: 60_000, limit: 100 }],
 *   storage: new TollgateThrottlerStorage(new RedisStore(redis)),
 * })
 */
export class TollgateThrottlerStorage {
  private readonly options: TollgateThrottlerStorageOptions & { store: RateLimiterOptions['store'] }
  private readonly prefix: string
  /** One limiter per (throttler, ttl, blockDuration): the few a module configures, made on first use. */
  private readonly counters = new Map<string, Counter>()

  /**
   * @param store a Tollgate store: `new RedisStore(client)` (node-redis, ioredis, their clusters, Valkey
   *   clients) or a `MemoryStore` for tests.
   * @throws ConfigError for a bad store or option, here, before the app serves anything.
   */
  constructor(store: RateLimiterOptions['store'], options: TollgateThrottlerStorageOptions = {}) {
    const { prefix = 'throttler', algorithm = 'sliding-log', ...rest } = options
    this.prefix = prefix
    this.options = { ...rest, algorithm, store }
    // The limiter checks the store and every option now, not on the first request.
    this.counter('default', 1000, 0)
  }

  /**
   * What `@nestjs/throttler`'s guard calls once per throttler and request.
   * @param key the throttler's key (its tracker, route and name, hashed by the guard).
   * @param ttl milliseconds a hit counts for.
   * @param limit hits allowed per `ttl`.
   * @param blockDuration milliseconds a client stays refused once it went past the limit (0: no block).
   * @param throttlerName the throttler's name: each name counts on its own.
   */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    const counter = this.counter(throttlerName, ttl, blockDuration)
    if (counter.limit !== limit) {
      counter.limit = limit
      counter.call = { limits: limit }
    }
    // The throttler's name is part of the identity: two throttlers never count each other's hits.
    const decision = await counter.limiter.consume(`${throttlerName}:${key}`, counter.call)
    if (!decision.allowed) {
      if (decision.source === 'fallback') throw new StoreUnavailableException(decision)
      return {
        totalHits: decision.limit + 1,
        timeToExpire: seconds(decision.resetMs),
        isBlocked: true,
        timeToBlockExpire: Math.max(1, seconds(decision.retryAfterMs)),
      }
    }
    return {
      totalHits: decision.limit - decision.remaining,
      timeToExpire: seconds(decision.resetMs),
      isBlocked: false,
      timeToBlockExpire: 0,
    }
  }

  private counter(throttlerName: string, ttl: number, blockDuration: number): Counter {
    const id = `${ttl}:${blockDuration}:${throttlerName}`
    let counter = this.counters.get(id)
    if (counter === undefined) {
      const limiter = new RateLimiter({
        ...this.options,
        // Keys carry the window, so distinct ttls never share counts; the prefix keeps each limiter's
        // policy its own on the store.
        prefix: `${this.prefix}:${ttl}:${blockDuration}`,
        name: NAME.test(throttlerName) ? throttlerName : 'throttler',
        limit: 1,
        window: ttl,
        // One refusal blocks for blockDuration: @nestjs/throttler's blocking.
        ...(blockDuration > 0 ? { penalty: { after: 1, block: blockDuration } } : {}),
      })
      counter = { limiter, limit: 1, call: { limits: 1 } }
      this.counters.set(id, counter)
    }
    return counter
  }
}

function seconds(ms: number): number {
  return Number.isFinite(ms) ? Math.ceil(ms / 1000) : 0
}
