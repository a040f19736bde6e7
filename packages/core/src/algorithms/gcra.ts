/**
 * gcra: generic cell rate algorithm in integer microseconds (one number per key, the theoretical arrival
 * time). Twin of `lua/algorithms/gcra.lua`. In any interval of length L: at most burst + floor(L / T)
 * units, with T = ceil(window_us / limit).
 * @module
 */
import type { ResolvedPolicy } from '../types'
import { ceilMs, type Twin } from './types'

type State = number // TAT, us

const emissionInterval = (p: ResolvedPolicy): number => Math.ceil((p.windowMs * 1000) / p.limit)

/**
 * The TAT twin shared by gcra and token-bucket (the same numbers: token-bucket's state is the time its
 * bucket is full again, which is gcra's TAT). The key expires at the TAT rounded up to the ms.
 */
export function tatTwin(code: number): Twin<State> {
  return {
    code,
    check(state, nowUs, p, cost) {
      const T = emissionInterval(p)
      const tau = p.burst * T
      // A TAT further than 2 x tau ahead was not written by a spend or a settlement (corrupt state, or a
      // clock that stepped back): it counts as 2 x tau ahead, a bucket one burst in debt.
      const tat = state === undefined ? nowUs : Math.min(Math.max(state, nowUs), nowUs + 2 * tau)
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
      return { state: c.tag, expiresAtMs: ceilMs(c.tag) }
    },
    refund(state, nowUs, p, tag, cost) {
      const T = emissionInterval(p)
      const most = nowUs + 2 * p.burst * T
      if (cost < 0) {
        // A settlement charging more: the over-charge follows the spend's TAT, and only its
        // part still ahead of now counts; the TAT may pass tau, up to 2 x tau (one burst in debt).
        const over = Math.min(-cost * T, 2 * p.burst * T)
        const extra = Math.min(over, tag + over - nowUs)
        if (extra <= 0) return state === undefined ? undefined : { state, expiresAtMs: ceilMs(state) }
        const base = state === undefined ? nowUs : Math.min(Math.max(state, nowUs), most)
        const tat = Math.min(base + extra, most)
        return { state: tat, expiresAtMs: ceilMs(tat) }
      }
      if (state === undefined) return undefined
      // Only the part of the spend that has not drained yet: once the TAT has passed the spend's own,
      // its units were given back by time already, and returning them again would create capacity.
      const refundable = Math.min(cost * T, Math.max(0, tag - nowUs))
      const tat = Math.max(nowUs, Math.min(state, most) - refundable)
      if (tat <= nowUs) return undefined
      return { state: tat, expiresAtMs: ceilMs(tat) }
    },
  }
}

export const gcra: Twin<State> = tatTwin(5)
