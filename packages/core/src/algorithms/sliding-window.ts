/**
 * sliding-window: two fixed windows, the previous one weighted by the part of it the sliding window still
 * covers. Twin of `lua/algorithms/sliding-window.lua`. One key per policy.
 * @module
 */
import type { Twin } from './types'

interface State {
  w: number
  c: number
  p: number
}

/**
 * The previous window's count, weighted by the part of it the sliding window still covers, rounded UP:
 * `weighted + curr + cost <= limit` is then exactly Cloudflare's `prev * (W - e) / W + curr + cost <= limit`.
 * (Rounding down, as @upstash/ratelimit does, admits one more right after every window boundary.)
 */
/** The most either counter holds (the Lua packs both in one integer, 26 bits each). */
const SW_MAX = 2 ** 26 - 1

const weigh = (prev: number, e: number, W: number): number => Math.ceil((prev * (W - e)) / W)

/** First elapsed ms t at which ceil(weight * (window - t) / window) <= a. */
const drainAt = (weight: number, a: number, window: number): number =>
  window - Math.floor((a * window) / weight)

export const slidingWindow: Twin<State> = {
  code: 2,
  check(state, nowUs, p, cost) {
    const nowMs = Math.floor(nowUs / 1000)
    const W = p.windowMs
    const wid = Math.floor(nowMs / W)
    const e = nowMs - wid * W
    let curr = 0
    let prev = 0
    if (state) {
      if (state.w === wid) {
        curr = state.c
        prev = state.p
      } else if (state.w === wid - 1) prev = state.c
    }
    const weighted = weigh(prev, e, W)
    const base = { w: wid, c: curr, p: prev }
    const remaining = Math.max(0, p.limit - weighted - curr)
    const resetMs = curr > 0 ? 2 * W - e : prev > 0 ? W - e : 0
    let allowed = false
    let retryMs: number
    if (cost > p.limit) retryMs = -1
    else if (weighted + curr + cost <= p.limit) {
      allowed = true
      retryMs = 0
    } else if (curr + cost <= p.limit) retryMs = drainAt(prev, p.limit - curr - cost, W) - e
    else retryMs = W - e + drainAt(curr, p.limit - cost, W)
    return { allowed, remaining, resetMs, retryMs, tag: wid, base }
  },
  commit(c, nowUs, p, cost) {
    const W = p.windowMs
    const e = Math.floor(nowUs / 1000) - c.base.w * W
    const weighted = weigh(c.base.p, e, W)
    c.remaining = p.limit - weighted - c.base.c - cost
    c.resetMs = 2 * W - e
    return { state: { w: c.base.w, c: c.base.c + cost, p: c.base.p }, expiresAtMs: (c.base.w + 2) * W }
  },
  refund(state, nowUs, p, tag, cost) {
    const nowWid = Math.floor(Math.floor(nowUs / 1000) / p.windowMs)
    if (cost < 0) {
      // a settlement charging more: into the spend's window while it still counts, past the limit if need be
      const keep = state && { state, expiresAtMs: (state.w + 2) * p.windowMs }
      if (tag !== nowWid && tag !== nowWid - 1) return keep
      let s = state && (state.w === nowWid || state.w === nowWid - 1) ? state : { w: tag, c: 0, p: 0 }
      if (s.w === tag) s = { w: tag, c: s.c - cost, p: s.p }
      else if (s.w === tag + 1) s = { w: s.w, c: s.c, p: s.p - cost }
      else s = { w: tag, c: -cost, p: s.c } // the stored window is the previous one now
      const capped = { w: s.w, c: Math.min(s.c, SW_MAX), p: Math.min(s.p, SW_MAX) }
      return { state: capped, expiresAtMs: (s.w + 2) * p.windowMs }
    }
    if (!state) return undefined
    const keep = { state, expiresAtMs: (state.w + 2) * p.windowMs }
    if (state.w !== nowWid && state.w !== nowWid - 1) return keep
    let { c, p: prev } = state
    if (state.w === tag) c = Math.max(0, c - cost)
    else if (state.w === tag + 1) prev = Math.max(0, prev - cost)
    else return keep
    if (c === 0 && prev === 0) return undefined
    return { state: { w: state.w, c, p: prev }, expiresAtMs: keep.expiresAtMs }
  },
}
