/**
 * gcra: generic cell rate algorithm in integer microseconds (one number per key, the theoretical arrival
 * time). Twin of `lua/src/gcra.lua`. In any interval of length L: at most burst + floor(L / T) units, with
 * T = ceil(window_us / limit).
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
      // A TAT further than tau ahead was not written by a spend (corrupt state, or a clock that stepped
      // back): it counts as tau ahead, an empty bucket.
      const tat = state === undefined ? nowUs : Math.min(Math.max(state, nowUs), nowUs + tau)
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
      if (state === undefined) return undefined
      const T = emissionInterval(p)
      // Only the part of the spend that has not drained yet: once the TAT has passed the spend's own,
      // its units were given back by time already, and returning them again would create capacity.
      const refundable = Math.min(cost * T, Math.max(0, tag - nowUs))
      const tat = Math.max(nowUs, Math.min(state, nowUs + p.burst * T) - refundable)
      if (tat <= nowUs) return undefined
      return { state: tat, expiresAtMs: ceilMs(tat) }
    },
  }
}

export const gcra: Twin<State> = tatTwin(5)
