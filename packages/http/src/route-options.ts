/**
 * Route merging, for adapters with per-route configuration: see {@link routeOptions}.
 * @module
 */
import { type KeyInput, RateLimiter } from '@tollgate/core'
import { KEY_SCOPE } from '@tollgate/core/internal'
import { isThenable, type MaybePromise } from './maybe-promise'
import { type HttpLimiterOptions, type KeyInfo, LEASE, LIMITER_OPTION_NAMES, LIMITS, RATE } from './options'

/**
 * A route's options over app-wide ones, for adapters with per-route configuration (Fastify's
 * `config.rateLimit`):
 * - a route `limiter` replaces the app-wide limiter and inline limiter options;
 * - a route's own limits (`limit`/`window`/`algorithm`/`burst`, `concurrency`/`lease`, or `policies`)
 *   make a limiter of its own (replacing the app's kind of limit),
 *   on the app-wide store and prefix (its limiter's, or inline);
 * - a `key` function inherited from the app is scoped to the route template (or to the route's `group`),
 *   like the default key, so the route has a budget of its own; a `key` the route sets is used as given.
 *
 * @param template the route template (`/users/:id`).
 * @example
 * const merged = routeOptions(pluginOptions, { limit: 10, window: '1m' }, '/search')
 * createHttpLimiter(merged, adapterOptions) // a limiter of its own on the plugin's store
 */
export function routeOptions<O extends HttpLimiterOptions<any, any>>(base: O, own: O, template: string): O {
  const merged = { ...base, ...own } as unknown as Record<string, unknown>
  const ownRecord = own as unknown as Record<string, unknown>
  if (own.limiter !== undefined) {
    for (const name of LIMITER_OPTION_NAMES) if (ownRecord[name] === undefined) delete merged[name]
  } else if (LIMITS.some((name) => ownRecord[name] !== undefined)) {
    const inherited = base.limiter instanceof RateLimiter ? base.limiter : undefined
    delete merged.limiter
    merged.store ??= inherited?.store
    merged.prefix ??= inherited?.prefix
    // A route's own limits on the app's prefix are the documented pattern: their keys carry the route
    // (or the route's own key), so they are not checked against the app's limiter; a group's routes
    // share their keys, so they are checked against each other.
    const group = merged.group
    ;(merged as { [KEY_SCOPE]?: string | null })[KEY_SCOPE] =
      typeof group === 'string' ? `group:${group}` : null
    // The route's kind of limit replaces the app's: named policies, a concurrency limit, or a rate.
    const other =
      own.policies !== undefined
        ? LIMITS.filter((name) => name !== 'policies')
        : own.concurrency !== undefined || own.lease !== undefined
          ? ['policies', ...RATE]
          : ['policies', ...LEASE]
    for (const name of other) if (ownRecord[name] === undefined) delete merged[name]
  }
  // A route's own key decides its whole key: an inherited group does not apply to it.
  if (own.key !== undefined && own.group === undefined) delete merged.group
  if (own.key === undefined && base.key !== undefined) {
    // An inherited key is scoped like the default key: to the route's group, else to its template.
    const group = merged.group
    merged.key = scopedKey(base.key, typeof group === 'string' ? `group:${group}` : template)
    if (typeof group === 'string') delete merged.group
  }
  return merged as O
}

/** An inherited key, scoped to a route like the default key (empty keys stay empty: they are a 400). */
function scopedKey<Req>(key: NonNullable<HttpLimiterOptions<Req>['key']>, template: string) {
  const scope = ` ${template}`
  const one = (k: unknown) => (typeof k === 'string' && k !== '' ? k + scope : k) as string
  const scopeInput = (input: KeyInput): KeyInput => {
    if (typeof input !== 'object' || input === null) return one(input)
    return Object.fromEntries(Object.entries(input).map(([policy, k]) => [policy, one(k)]))
  }
  return (req: Req, info: KeyInfo): MaybePromise<KeyInput> => {
    const input = key(req, info)
    // A synchronous key stays synchronous (no await, no deadline entry).
    return isThenable(input) ? input.then(scopeInput) : scopeInput(input)
  }
}
