/**
 * A store reply made a `Decision`: each policy's verdict, the binding policy (the one the client is
 * told about), and the spend's refund token.
 * @module
 */

import { CONTROL_ALLOW_TAG, CONTROL_BLOCK_TAG } from '../controls'
import { isFree, maxCost } from '../cost'
import { base64Url } from '../hash'
import type { LimitOverrides } from '../limits'
import { BLOCKED_TAG } from '../penalty'
import type {
  Decision,
  PairCost,
  PolicyDecision,
  RefundToken,
  ResolvedPolicy,
  StoreEntry,
  StoreReply,
} from '../types'

/** What a limiter's decisions depend on besides the reply (built once per limiter). */
export interface DecisionContext {
  /** Names of the policies in shadow (undefined: none). */
  readonly shadowNames: ReadonlySet<string> | undefined
  readonly policyByName: ReadonlyMap<string, ResolvedPolicy>
  /** Per-call `limits`: a spend under one is given back under it. */
  readonly overrides: LimitOverrides
}

/**
 * Spend ids: the nonce of the process that made the spend + the spend's number there. Unique across
 * processes and limiters without a random draw per decision, and carried in the token, so a copy sent
 * to another process (JSON) names the same spend.
 */
let nonce: string | undefined
let spendSeq = 0

/** This process's nonce, drawn on first use, inside a request: Workers forbid random values in a module's global scope. */
export function spendNonce(): string {
  if (nonce === undefined) {
    const bytes = new Uint8Array(9)
    globalThis.crypto.getRandomValues(bytes)
    nonce = base64Url(bytes)
  }
  return nonce
}

/** The next spend's number in this process. */
export function nextSpendSeq(): number {
  return ++spendSeq
}

export function decide(
  ctx: DecisionContext,
  entries: StoreEntry[],
  cost: PairCost,
  reply: StoreReply,
  spent: boolean,
  source: Decision['source'],
): Decision {
  const { results } = reply
  let allowed = true
  const policies: PolicyDecision[] = new Array(entries.length)
  let spentUnder: StoreEntry[] | undefined
  for (let i = 0; i < entries.length; i++) {
    const r = results[i]!
    let p = entries[i]!.policy
    if (r.limit !== undefined) {
      // the identity's stored override set this pair's limit: shown, and a refund given back under it
      p = ctx.overrides.stored(p, r.limit)
      spentUnder ??= [...entries]
      spentUnder[i] = { ...entries[i]!, policy: p }
    }
    const retryAfterMs = r.retryAfterMs < 0 ? Number.POSITIVE_INFINITY : r.retryAfterMs
    const decided: { -readonly [K in keyof PolicyDecision]: PolicyDecision[K] } = {
      policy: p.name,
      key: entries[i]!.identity ?? entries[i]!.key,
      algorithm: p.algorithm,
      allowed: r.allowed,
      limit: p.burst,
      windowMs: p.windowMs,
      remaining: r.remaining,
      resetMs: r.resetMs,
      retryAfterMs,
    }
    // set, not spread in: a spread plus a new name makes V8 build a fresh hidden class per call
    if (r.tag === BLOCKED_TAG && !r.allowed) decided.blocked = true
    policies[i] = decided
    if (!r.allowed) allowed = false
  }
  // the identities' block or allow entries decided the call in the store (every pair carries the tag)
  // (a call over several cluster slots: any pair a block refused; allow only if every pair was allowed)
  let from = source
  let free = allowed && results.length > 0
  for (let i = 0; i < results.length; i++) {
    const tag = results[i]!.tag
    if (tag === CONTROL_BLOCK_TAG && !allowed) from = 'block'
    if (tag !== CONTROL_ALLOW_TAG) free = false
  }
  if (free) from = 'allow'
  const binding = bindingOf(policies, allowed, ctx.shadowNames)
  const bp = policies[binding]!
  const total = typeof cost === 'number' ? cost : maxCost(cost)
  let refundToken: RefundToken | undefined
  if (spent && allowed && from !== 'allow' && !isFree(cost)) {
    // loops, not map(): no closure per decision
    const keys = new Array<string>(entries.length)
    for (let i = 0; i < entries.length; i++) keys[i] = entries[i]!.key
    const tags = new Array<number>(results.length)
    for (let i = 0; i < results.length; i++) tags[i] = results[i]!.tag
    refundToken = {
      keys,
      tags,
      cost: total,
      costs: typeof cost === 'number' ? undefined : cost,
      nonce: spendNonce(),
      seq: nextSpendSeq(),
      limits: limitsOf(ctx, spentUnder ?? entries),
    }
  }
  return {
    allowed,
    limit: bp.limit,
    remaining: bp.remaining,
    resetMs: bp.resetMs,
    retryAfterMs: allowed ? 0 : bp.retryAfterMs,
    cost: total,
    policies,
    binding,
    source: from,
    refundToken,
  }
}

/**
 * The binding pair: the refusing one with the longest wait, an enforced one before any in shadow (a
 * shadow policy never changes what a refused client is told, nor what the deny cache holds); if all
 * allow, the one with fewest units left (the later reset on a tie).
 */
export function bindingOf(
  policies: readonly PolicyDecision[],
  allowed: boolean,
  shadow: ReadonlySet<string> | undefined,
): number {
  let binding = 0
  for (let i = 1; i < policies.length; i++) {
    const a = policies[i]!
    const b = policies[binding]!
    if (allowed) {
      if (a.remaining < b.remaining || (a.remaining === b.remaining && a.resetMs > b.resetMs)) binding = i
    } else if (!a.allowed) {
      if (b.allowed) binding = i
      else if (shadow !== undefined && shadow.has(a.policy) !== shadow.has(b.policy)) {
        if (shadow.has(b.policy)) binding = i
      } else if (a.retryAfterMs > b.retryAfterMs) binding = i
    }
  }
  return binding
}

/** The limits of a call made with per-call `limits` (for its refund), else undefined. */
function limitsOf(ctx: DecisionContext, entries: readonly StoreEntry[]): number[] | undefined {
  if (!ctx.overrides.used) return undefined
  for (const e of entries) {
    if (ctx.policyByName.get(e.policy.name) !== e.policy) return entries.map((x) => x.policy.limit)
  }
  return undefined
}

/**
 * The longest wait among the refusing rate policies (not concurrency ones) of a decision: 0 when only
 * concurrency policies refused (or none did). A failure-policy refusal (no pairs) keeps its own wait.
 */
export function rateRetryMs(decision: Decision): number {
  const policies = decision.policies
  if (policies.length === 0) return decision.retryAfterMs
  let ms = 0
  for (let i = 0; i < policies.length; i++) {
    const p = policies[i]!
    if (!p.allowed && p.algorithm !== 'concurrency' && p.retryAfterMs > ms) ms = p.retryAfterMs
  }
  return ms
}
