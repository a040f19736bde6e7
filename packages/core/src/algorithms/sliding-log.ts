/**
 * sliding-log: one entry per admitted unit, timestamped in microseconds. Exact in every window-long
 * interval; refused calls are never stored; never more than `limit` entries. Twin of
 * `lua/algorithms/sliding-log.lua`.
 * @module
 */
import { ceilMs, type Twin } from './types'

/** Spend times in us, ascending (one per unit, like the sorted set's members). */
type State = number[]

export const slidingLog: Twin<State> = {
  code: 3,
  check(state, nowUs, p, cost) {
    const windowUs = p.windowMs * 1000
    const floorUs = nowUs - windowUs
    const log = state ?? []
    let first = 0 // index of the oldest live entry: live while spend > now - window
    while (first < log.length && log[first]! <= floorUs) first++
    const count = log.length - first
    const remaining = Math.max(0, p.limit - count)
    const resetMs = count > 0 ? ceilMs(log[log.length - 1]! + windowUs - nowUs) : 0
    const base = log
    if (cost > p.limit) return { allowed: false, remaining, resetMs, retryMs: -1, tag: nowUs, base }
    if (count + cost <= p.limit) return { allowed: true, remaining, resetMs, retryMs: 0, tag: nowUs, base }
    const k = count + cost - p.limit
    const retryMs = ceilMs(log[first + k - 1]! + windowUs - nowUs)
    return { allowed: false, remaining, resetMs, retryMs, tag: nowUs, base }
  },
  commit(c, nowUs, p, cost) {
    const floorUs = nowUs - p.windowMs * 1000
    const log = c.base.filter((t) => t > floorUs)
    for (let i = 0; i < cost; i++) log.push(nowUs)
    c.remaining = p.limit - (log.length - cost) - cost
    c.resetMs = p.windowMs
    return { state: log, expiresAtMs: Math.floor(nowUs / 1000) + p.windowMs + 1 }
  },
  refund(state, nowUs, p, tag, cost) {
    if (cost < 0) {
      // A settlement charging more: units at the spend's time while it is in the window; only the newest
      // `limit` are kept (they give every decision and retry time the whole log would).
      const floorUs = nowUs - p.windowMs * 1000
      const keep = state && {
        state,
        expiresAtMs: Math.floor(state[state.length - 1]! / 1000) + p.windowMs + 1,
      }
      if (tag <= floorUs) return keep
      const live = (state ?? []).filter((t) => t > floorUs)
      let at = live.length
      while (at > 0 && live[at - 1]! > tag) at--
      const added = new Array<number>(Math.min(-cost, p.limit)).fill(tag)
      const log = live.slice(0, at).concat(added, live.slice(at))
      const kept = log.length > p.limit ? log.slice(log.length - p.limit) : log
      return { state: kept, expiresAtMs: Math.floor(kept[kept.length - 1]! / 1000) + p.windowMs + 1 }
    }
    if (!state) return undefined
    const log = state.slice()
    let removed = 0
    for (let i = log.length - 1; i >= 0 && removed < cost; i--) {
      if (log[i] === tag) {
        log.splice(i, 1)
        removed++
      }
    }
    if (log.length === 0) return undefined
    return { state: log, expiresAtMs: Math.floor(log[log.length - 1]! / 1000) + p.windowMs + 1 }
  },
}
