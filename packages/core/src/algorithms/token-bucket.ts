/**
 * token-bucket: `burst` whole tokens, one more every ceil(window_us / limit) us. Twin of
 * `lua/token-bucket.lua`. In any interval of length L: at most burst + floor(L / interval) units.
 * @module
 */
import type { ResolvedPolicy } from '../types'
import { ceilMs, type Twin } from './types'

interface State {
  tk: number
  ts: number
}

export const tokenInterval = (p: ResolvedPolicy): number => Math.ceil((p.windowMs * 1000) / p.limit)

function refill(state: State | undefined, nowUs: number, p: ResolvedPolicy): State {
  if (!state) return { tk: p.burst, ts: nowUs }
  const interval = tokenInterval(p)
  const ts0 = Math.min(state.ts, nowUs)
  const n = Math.floor((nowUs - ts0) / interval)
  const tk = state.tk + n
  return tk >= p.burst ? { tk: p.burst, ts: nowUs } : { tk, ts: ts0 + n * interval }
}

function resetMs(s: State, nowUs: number, p: ResolvedPolicy): number {
  return s.tk >= p.burst ? 0 : ceilMs((p.burst - s.tk) * tokenInterval(p) - (nowUs - s.ts))
}

export const tokenBucket: Twin<State> = {
  code: 4,
  check(state, nowUs, p, cost) {
    const base = refill(state, nowUs, p)
    const common = { remaining: base.tk, resetMs: resetMs(base, nowUs, p), tag: 0, base }
    if (cost > p.burst) return { allowed: false, retryMs: -1, ...common }
    if (base.tk >= cost) return { allowed: true, retryMs: 0, ...common }
    const retryMs = ceilMs((cost - base.tk) * tokenInterval(p) - (nowUs - base.ts))
    return { allowed: false, retryMs, ...common }
  },
  commit(c, nowUs, p, cost) {
    const state = { tk: c.base.tk - cost, ts: c.base.ts }
    c.remaining = state.tk
    c.resetMs = resetMs(state, nowUs, p)
    return { state, expiresAtMs: Math.floor(nowUs / 1000) + c.resetMs }
  },
  refund(state, nowUs, p, _tag, cost) {
    const s = refill(state, nowUs, p)
    const tk = Math.min(p.burst, s.tk + cost)
    if (tk >= p.burst) return undefined
    const next = { tk, ts: s.ts }
    return { state: next, expiresAtMs: Math.floor(nowUs / 1000) + resetMs(next, nowUs, p) }
  },
}
