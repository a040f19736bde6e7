import { createClient } from 'redis'

/**
 * One node-redis client per server process. Next.js bundles each route and the proxy separately, so a
 * module-level client would be one connection per bundle: it lives on globalThis instead. Created at
 * boot by instrumentation.js, so the first request finds it connected (a client that is still connecting
 * gets the limiter's failure policy, not a queued command).
 */
export function redis() {
  if (globalThis.tollgateRedis === undefined) {
    const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }).on(
      'error',
      (err) => console.warn('redis:', err.message),
    )
    // Boots without Redis and survives an outage: the limiter's failure policy answers meanwhile.
    globalThis.tollgateConnecting = client.connect().catch(() => {})
    globalThis.tollgateRedis = client
  }
  return globalThis.tollgateRedis
}

/** Waits for the connection, at most `ms`: a boot never hangs on a Redis that is down. */
export function connected(ms) {
  redis()
  return Promise.race([
    globalThis.tollgateConnecting,
    new Promise((resolve) => setTimeout(resolve, ms).unref()),
  ])
}
