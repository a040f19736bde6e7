/**
 * What an upstream's response says about the budget it has left for the caller: the OpenAI-style
 * `x-ratelimit-*-requests` / `-tokens` fields, the IETF `RateLimit` field (the named-policy syntax of
 * draft-ietf-httpapi-ratelimit-headers -08 to -10, and draft-7's `limit=, remaining=, reset=`),
 * draft-6's `RateLimit-Remaining` / `-Reset` / `-Limit`, the common `X-RateLimit-Remaining`, and
 * `Retry-After`. `@tollgate/http` only writes these fields, so reading them lives here.
 * @module
 */

/** One budget as the upstream reports it; a field it did not send is undefined. */
export interface UpstreamBudget {
  /** Units left until the reset. */
  readonly remaining?: number
  /** The budget's size per window. */
  readonly limit?: number
  /** Milliseconds until the budget is whole again. */
  readonly resetMs?: number
}

/** The budgets a response reports, by what they count, and how long it asks the caller to wait. */
export interface UpstreamLimits {
  readonly requests?: UpstreamBudget
  readonly tokens?: UpstreamBudget
  /** From `Retry-After` (seconds or an HTTP date), in milliseconds; undefined when absent or unreadable. */
  readonly retryAfterMs?: number
}

type Dimension = 'requests' | 'tokens'

/**
 * Reads every rate limit field a response carries. Where several fields report one budget, the most
 * restrictive answer wins (the least remaining, the smallest limit, the latest reset).
 * @example
 * upstreamLimits(new Headers({ 'x-ratelimit-remaining-requests': '59', 'x-ratelimit-reset-requests': '1s' }))
 * // { requests: { remaining: 59, resetMs: 1000 } }
 */
export function upstreamLimits(headers: Headers, nowMs = Date.now()): UpstreamLimits {
  const found: Record<Dimension, UpstreamBudget | undefined> = { requests: undefined, tokens: undefined }
  const add = (dimension: Dimension, budget: UpstreamBudget) => {
    found[dimension] = tighter(found[dimension], budget)
  }
  for (const dimension of ['requests', 'tokens'] as const) {
    const budget = {
      remaining: count(headers.get(`x-ratelimit-remaining-${dimension}`)),
      limit: count(headers.get(`x-ratelimit-limit-${dimension}`)),
      resetMs: durationMs(headers.get(`x-ratelimit-reset-${dimension}`)),
    }
    if (budget.remaining !== undefined || budget.limit !== undefined) add(dimension, budget)
  }
  const legacy = {
    remaining: count(headers.get('x-ratelimit-remaining') ?? headers.get('ratelimit-remaining')),
    limit: count(headers.get('x-ratelimit-limit') ?? headers.get('ratelimit-limit')),
    resetMs: resetMs(headers.get('x-ratelimit-reset') ?? headers.get('ratelimit-reset'), nowMs),
  }
  if (legacy.remaining !== undefined) add('requests', legacy)
  const field = headers.get('ratelimit')
  if (field !== null) {
    const policies = policyLimits(headers.get('ratelimit-policy'))
    for (const item of listItems(field)) {
      const { name, params } = item
      // draft-7 sends one dictionary (`limit=10, remaining=9, reset=1`): its members are items here
      if (name === 'remaining' || name === 'limit' || name === 'reset') continue
      const r = count(params.get('r'))
      if (r === undefined) continue
      const t = count(params.get('t'))
      add(/token/i.test(name) ? 'tokens' : 'requests', {
        remaining: r,
        limit: policies.get(name),
        resetMs: t === undefined ? undefined : t * 1000,
      })
    }
    const members = new Map(listItems(field).map((item) => [item.name, item.value]))
    const remaining = count(members.get('remaining'))
    if (remaining !== undefined) {
      const reset = count(members.get('reset'))
      add('requests', {
        remaining,
        limit: count(members.get('limit')),
        resetMs: reset === undefined ? undefined : reset * 1000,
      })
    }
  }
  return {
    ...(found.requests && { requests: found.requests }),
    ...(found.tokens && { tokens: found.tokens }),
    ...retryAfter(headers.get('retry-after'), nowMs),
  }
}

/**
 * A reset duration as OpenAI writes it (`'6m0s'`, `'1s'`, `'20ms'`, `'1h2m3.5s'`), or plain seconds,
 * in whole milliseconds rounded up; undefined when unreadable.
 * @example durationMs('6m0s') // 360000
 */
export function durationMs(text: string | null | undefined): number | undefined {
  if (text === null || text === undefined) return undefined
  const value = text.trim()
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000)
  if (!/^(\d+(\.\d+)?(h|ms|m|s))+$/.test(value)) return undefined
  let ms = 0
  for (const [, n, unit] of value.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g)) {
    ms += Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS]
  }
  return Math.ceil(ms)
}
const UNIT_MS = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 }

/** `Retry-After` in milliseconds: delay-seconds, or an HTTP date (never negative). */
function retryAfter(text: string | null, nowMs: number): { retryAfterMs?: number } {
  if (text === null) return {}
  const value = text.trim()
  if (/^\d+$/.test(value)) return { retryAfterMs: Number(value) * 1000 }
  const at = Date.parse(value)
  return Number.isNaN(at) ? {} : { retryAfterMs: Math.max(0, at - nowMs) }
}

/** A reset in seconds, or (GitHub's `x-ratelimit-reset`) a Unix time in seconds. */
function resetMs(text: string | null, nowMs: number): number | undefined {
  const seconds = count(text)
  if (seconds === undefined) return undefined
  // no window lasts since 2001: a number that large is a moment, not a delay
  return seconds > 1_000_000_000 ? Math.max(0, seconds * 1000 - nowMs) : seconds * 1000
}

/** A non-negative integer field value; undefined when absent or anything else. */
function count(text: string | null | undefined): number | undefined {
  if (text === null || text === undefined) return undefined
  const value = text.trim()
  if (!/^\d{1,15}$/.test(value)) return undefined
  return Number(value)
}

/** `RateLimit-Policy` quotas by policy name (`"burst";q=10;w=1` gives burst: 10). */
function policyLimits(text: string | null): Map<string, number> {
  const quotas = new Map<string, number>()
  if (text === null) return quotas
  for (const { name, params } of listItems(text)) {
    const q = count(params.get('q'))
    if (q !== undefined) quotas.set(name, q)
  }
  return quotas
}

interface ListItem {
  readonly name: string
  /** The member value of a dictionary member (`remaining=9`), else undefined. */
  readonly value: string | undefined
  readonly params: Map<string, string>
}

/**
 * The members of a Structured Fields list or dictionary, leniently: enough to read integer parameters
 * and names, quoted or not. Commas and semicolons inside a quoted string do not split it.
 */
function listItems(text: string): ListItem[] {
  const items: ListItem[] = []
  for (const member of split(text, ',')) {
    const [head = '', ...rest] = split(member, ';')
    const eq = head.indexOf('=')
    const name = unquote(eq < 0 ? head : head.slice(0, eq))
    const value = eq < 0 ? undefined : unquote(head.slice(eq + 1))
    const params = new Map<string, string>()
    for (const param of rest) {
      const at = param.indexOf('=')
      params.set(unquote(at < 0 ? param : param.slice(0, at)), at < 0 ? '' : unquote(param.slice(at + 1)))
    }
    if (name !== '') items.push({ name, value, params })
  }
  return items
}

function split(text: string, separator: string): string[] {
  const parts: string[] = []
  let quoted = false
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (c === '\\' && quoted) i++
    else if (c === '"') quoted = !quoted
    else if (c === separator && !quoted) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return parts
}

function unquote(text: string): string {
  const value = text.trim()
  return value.length >= 2 && value.startsWith('"') && value.endsWith('"')
    ? value.slice(1, -1).replace(/\\(.)/g, '$1')
    : value
}

/** The more restrictive of two reports of one budget, field by field. */
function tighter(a: UpstreamBudget | undefined, b: UpstreamBudget): UpstreamBudget {
  if (a === undefined) return strip(b)
  return strip({
    remaining: least(a.remaining, b.remaining),
    limit: least(a.limit, b.limit),
    resetMs:
      a.resetMs === undefined
        ? b.resetMs
        : b.resetMs === undefined
          ? a.resetMs
          : Math.max(a.resetMs, b.resetMs),
  })
}
function least(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b)
}
function strip(budget: UpstreamBudget): UpstreamBudget {
  const out: { remaining?: number; limit?: number; resetMs?: number } = {}
  if (budget.remaining !== undefined) out.remaining = budget.remaining
  if (budget.limit !== undefined) out.limit = budget.limit
  if (budget.resetMs !== undefined) out.resetMs = budget.resetMs
  return out
}
