/**
 * Two limiters of one process on one store and prefix with different policies would read each other's
 * counts as their own. Each `RateLimiter` records its policies here at construction, per store (weakly:
 * neither the store nor the limiter is kept alive by this), and a second live limiter whose policies
 * differ is refused with a `ConfigError`. Stores that reach the same data (every RedisStore over one
 * client) are one store here ({@link shareState}). Nothing here runs per request.
 * @module
 */
import { ConfigError } from './errors'
import { keySignature } from './keys'
import type { ResolvedPolicy } from './types'

interface Registered {
  readonly limiter: WeakRef<object>
  /** The state-defining options of every policy: equal for limiters that may share state. */
  readonly identity: string
  /** `"api" (sliding-window 3/1h)`, for the message. */
  readonly label: string
}

/** store (or what it shares state through) -> `<prefix> <scope>` -> the limiters registered under it. */
const registry = new WeakMap<object, Map<string, Registered[]>>()

/** store -> the object its state is registered under, when not the store itself. */
const owners = new WeakMap<object, object>()

/**
 * Registers `store`'s limiters under `owner`, shared with every other store given the same owner: a
 * RedisStore passes its client, so two stores over one client cannot hide a clash from each other.
 * @internal
 */
export function shareState(store: object, owner: object): void {
  owners.set(store, owner)
}

/**
 * Marks the options of an adapter's per-route limits (Fastify's `config.rateLimit`), which build a
 * limiter on the app's store and prefix by design: their keys carry the route or the route's own key.
 * The value: `undefined` checks against every limiter of the prefix, a string only against those of the
 * same scope (a route `group`, whose routes share keys), `null` skips the check.
 * @internal
 */
export const KEY_SCOPE: unique symbol = Symbol('tollgate.keyScope')

let currentScope: string | null | undefined

/** Builds a limiter (synchronously) whose keys are scoped as {@link KEY_SCOPE} describes. @internal */
export function inKeyScope<T>(scope: string | null | undefined, build: () => T): T {
  const outer = currentScope
  currentScope = scope
  try {
    return build()
  } finally {
    currentScope = outer
  }
}

/**
 * Builds limiters that only read what other limiters stored (a tool that inspects a prefix, one limiter
 * per stored pair): they are not checked against, nor registered beside, the limiters of their store.
 */
export function withoutPrefixCheck<T>(build: () => T): T {
  return inKeyScope(null, build)
}

function window(ms: number): string {
  return keySignature('fixed-window', ms).slice(3)
}

function describePolicy(p: ResolvedPolicy, single: boolean): string {
  const name = single ? '' : `${p.name}: `
  if (p.algorithm === 'concurrency') return `${name}concurrency ${p.limit}, lease ${window(p.windowMs)}`
  const burst = p.burst === p.limit ? '' : ` burst ${p.burst}`
  const pen = p.penalty
  const penalty = pen
    ? ` penalty ${pen.after}/${window(pen.withinMs)} block ${window(pen.blockMs)} x${pen.factor} max ${window(pen.maxMs)} forget ${window(pen.forgetMs)}`
    : ''
  if (p.calendar) return `${name}${p.algorithm} ${p.limit}/${p.calendar.unit} ${p.calendar.timeZone}`
  return `${name}${p.algorithm} ${p.limit}/${window(p.windowMs)}${burst}${penalty}`
}

/**
 * Records a new limiter; throws `ConfigError` (option `prefix`) when another live limiter on the same
 * store and prefix has other policies.
 */
export function register(
  limiter: object,
  store: object,
  prefix: string,
  name: string,
  policies: readonly ResolvedPolicy[],
  single: boolean,
): void {
  const scope = currentScope
  if (scope === null) return
  const described = policies.map((p) => describePolicy(p, single))
  const identity = `${single ? 'single' : 'named'}|${[...described].sort().join('|')}`
  const label = `"${name}" (${described.join(', ')})`
  const owner = owners.get(store) ?? store
  let byPrefix = registry.get(owner)
  if (byPrefix === undefined) {
    byPrefix = new Map()
    registry.set(owner, byPrefix)
  }
  const slot = scope === undefined ? `${prefix} ` : `${prefix} ${scope}`
  const live = (byPrefix.get(slot) ?? []).filter((r) => r.limiter.deref() !== undefined)
  const other = live.find((r) => r.identity !== identity)
  if (other !== undefined) {
    byPrefix.set(slot, live)
    throw new ConfigError(
      'prefix',
      `a prefix of its own on this store: limiter ${label} and limiter ${other.label} would share ` +
        'state under it. Give each limiter its own prefix, or make them one limiter with several ' +
        'named policies',
      prefix,
    )
  }
  live.push({ limiter: new WeakRef(limiter), identity, label })
  byPrefix.set(slot, live)
}
