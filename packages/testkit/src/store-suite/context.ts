/**
 * What every part of the store suite shares: the store under test (one fixture per suite, closed after
 * it), limiters on fresh prefixes, and the bounds the algorithms must keep.
 */
import { type Algorithm, type Decision, MemoryStore, RateLimiter, type Store } from '@tollgate/core'

/** A store under test, and the Redis-only probes some cases use (skipped when absent). */
export interface StoreFixture {
  store: Store
  close(): Promise<void>
  /** Redis only: PTTL of a key in ms (-2 missing, -1 no TTL). */
  pttl?(key: string): Promise<number>
  /** Redis only: whether a key exists. */
  exists?(key: string): Promise<boolean>
  /** Redis only: ZCARD. */
  zcard?(key: string): Promise<number>
  /** The limiters' deadline, for stores slower than a local socket (Redis over HTTP on a busy machine). */
  timeoutMs?: number
  /**
   * The window of the tests that wait for time to pass (retry-after honesty, TTL expiry), for stores whose
   * calls take a sizeable part of the default (a few REST round trips on a busy machine).
   * @default 300 and 250
   */
  shortWindowMs?: number
}

export const ALL_ALGORITHMS: readonly Algorithm[] = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'gcra',
]

/** The longest TTL each algorithm may leave on a key, in windows (+ slack ms). */
export const TTL_BOUND: Record<Algorithm, (windowMs: number) => number> = {
  'fixed-window': (w) => w,
  'sliding-window': (w) => 2 * w,
  'sliding-log': (w) => w + 1,
  // The expiry is the time the bucket is full again, rounded up to Redis' whole milliseconds.
  'token-bucket': (w) => w + 1,
  gcra: (w) => w + 1,
  // The newest lease's expiry (a lease is `window` long).
  concurrency: (w) => w,
}

let counter = 0
/** A prefix no other test uses. */
export const uniquePrefix = (name: string): string =>
  `t${process.pid}x${Date.now().toString(36)}x${counter++}x${name}`

/** `n` consumes of one key, one after another. */
export const seq = async (limiter: RateLimiter, key: string, n: number, cost = 1): Promise<Decision[]> => {
  const out: Decision[] = []
  for (let i = 0; i < n; i++) out.push(await limiter.consume(key, { cost }))
  return out
}

/** The fixture each part of the suite describes its cases with. */
export interface StoreSuiteContext {
  /** The store under test (set once the suite's `beforeAll` has run). */
  readonly fx: StoreFixture
  /** A single-policy limiter on a fresh prefix (a day-long window unless given). */
  make(algorithm: Algorithm, limit?: number, window?: number | '1d'): RateLimiter
}

/** Registers the suite's hooks (in the calling `describe`) and returns its fixture. */
export function storeSuiteContext(makeFixture: () => Promise<StoreFixture>): StoreSuiteContext {
  let fx: StoreFixture | undefined
  beforeAll(async () => {
    fx = await makeFixture()
  })
  afterAll(async () => {
    await fx?.close()
  })
  const context: StoreSuiteContext = {
    get fx() {
      if (!fx) throw new Error('the store fixture is set in beforeAll')
      return fx
    },
    // Day-long windows by default: windows are aligned to the epoch, and a boundary crossed in the middle
    // of a test would change its numbers.
    make: (algorithm, limit = 5, window = '1d') =>
      new RateLimiter({
        store: context.fx.store,
        prefix: uniquePrefix(algorithm),
        limit,
        window,
        algorithm,
        timeoutMs: context.fx.timeoutMs,
      }),
  }
  return context
}

/** A MemoryStore fixture. */
export const memoryFixture = async (): Promise<StoreFixture> => ({
  store: new MemoryStore(),
  close: async () => {},
})
