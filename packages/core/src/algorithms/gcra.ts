/**
 * gcra: generic cell rate algorithm in integer microseconds (one number per key, the theoretical arrival
 * time). Twin of `lua/gcra.lua`. In any interval of length L: at most burst + floor(L / T) units, with
 * T = ceil(window_us / limit).
 * @module
 */
import type { ResolvedPolicy } from '../types'
import { ceilMs, type Twin } from './types'

type State = number // TAT, us

export const emissionInterval = (p: ResolvedPolicy): number => Math.ceil((p.windowMs * 1000) / p.limit)

export const gcra: Twin<State> = {
  code: 5,
  check(state, nowUs, p, cost) {
    const T = emissionInterval(p)
    const tau = p.burst * T
    const tat = state === undefined ? nowUs : Math.max(state, nowUs)
    const newTat = tat + cost * T
    const remaining = Math.max(0, Math.floor((tau - (tat - nowUs)) / T))
    const resetMs = ceilMs(tat - nowUs)
    const common = { remaining, resetMs, tag: newTat, base: tat }
    if (cost > p.burst) return { allowed: false, retryMs: -1, ...common }
    if (newTat - nowUs <= tau) return { allowed: true, retryMs: 0, ...common }
    return { allowed: false, retryMs: ceilMs(newTat - tau - nowUs), ...common }
  },
  commit(c, nowUs, p, _cost) {
    const T = emissionInterval(p)
    const ahead = c.tag - nowUs
    c.remaining = Math.floor((p.burst * T - ahead) / T)
    c.resetMs = ceilMs(ahead)
    return { state: c.tag, expiresAtMs: Math.floor(nowUs / 1000) + c.resetMs }
  },
  refund(state, nowUs, p, tag, cost) {
    if (state === undefined) return undefined
    const refundable = Math.min(cost * emissionInterval(p), Math.max(0, tag - nowUs))
    const tat = Math.max(nowUs, state - refundable)
    if (tat <= nowUs) return undefined
    return { state: tat, expiresAtMs: Math.floor(nowUs / 1000) + ceilMs(tat - nowUs) }
  },
}
