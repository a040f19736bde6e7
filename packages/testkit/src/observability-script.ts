/**
 * The scripted sequence the observability tests run through every adapter: allowed, refused (store),
 * refused (deny cache), limiter shadow, middleware shadow, and failed over (a killed redis-server under
 * `onStoreError: 'deny'`). The tests then assert the exact metric values it must produce.
 * @module
 */
import { RateLimiter, type RedisStore } from '@tollgate/core'
import type { AppFactory } from './http-suite'

/** What {@link runObservabilityScript} needs. */
export interface ScriptOptions {
  /** A store on the live test Redis. */
  store: RedisStore
  /** A store whose client was connected, then its server killed (calls fail with connection errors). */
  deadStore: RedisStore
  /** Unique per run: limiter names are `<tag>-api`, `<tag>-shadow`, `<tag>-mw`, `<tag>-down`. */
  tag: string
}

/** The statuses each route answered, in order. */
export interface ScriptResult {
  api: number[]
  shadow: number[]
  mw: number[]
  down: number[]
}

/**
 * Builds one app through the adapter's conformance factory and sends:
 * - `/api` x4 (limit 2): 200, 200, 429 (store), 429 (deny cache);
 * - `/shadow` x2 (limiter `shadow: true`, limit 1): 200, 200 (the second would have refused);
 * - `/mw` x2 (enforced limiter, middleware `shadow: true`, limit 1): 200, 200 (same);
 * - `/down` x3 (dead store, `deny`, breaker after 2 failures): 503 x3 (2 store errors, then circuit open).
 */
export async function runObservabilityScript(factory: AppFactory, o: ScriptOptions): Promise<ScriptResult> {
  const prefix = `obs-${o.tag}-${Date.now().toString(36)}`
  const make = (name: string, extra: Record<string, unknown> = {}) =>
    new RateLimiter({
      store: o.store,
      name: `${o.tag}-${name}`,
      prefix: `${prefix}-${name}`,
      window: '1m',
      limit: 1,
      ...extra,
    })
  const api = make('api', { limit: 2 })
  const shadow = make('shadow', { shadow: true })
  const mw = make('mw')
  const down = new RateLimiter({
    store: o.deadStore,
    name: `${o.tag}-down`,
    prefix: `${prefix}-down`,
    limit: 5,
    window: '1m',
    onStoreError: 'deny',
    breaker: { failures: 2, cooldownMs: 60_000 },
  })
  const app = await factory({
    routes: [
      { method: 'GET', path: '/api', options: { limiter: api } },
      { method: 'GET', path: '/shadow', options: { limiter: shadow } },
      { method: 'GET', path: '/mw', options: { limiter: mw, shadow: true } },
      { method: 'GET', path: '/down', options: { limiter: down } },
    ],
  })
  try {
    const send = async (path: string, n: number) => {
      const statuses: number[] = []
      for (let i = 0; i < n; i++) {
        const res = await fetch(`${app.url}${path}`)
        await res.arrayBuffer()
        statuses.push(res.status)
      }
      return statuses
    }
    return {
      api: await send('/api', 4),
      shadow: await send('/shadow', 2),
      mw: await send('/mw', 2),
      down: await send('/down', 3),
    }
  } finally {
    await app.close()
  }
}

/** The statuses {@link runObservabilityScript} must see. */
export const SCRIPT_STATUSES: ScriptResult = {
  api: [200, 200, 429, 429],
  shadow: [200, 200],
  mw: [200, 200],
  down: [503, 503, 503],
}
