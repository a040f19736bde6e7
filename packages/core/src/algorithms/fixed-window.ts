/**
 * fixed-window: a counter per epoch-aligned window. Twin of `lua/algorithms/fixed-window.lua`.
 * Admits at most `limit` per aligned window, so up to 2 x limit across one boundary.
 * @module
 */
import type { Twin } from './types'

interface State {
  wid: number
  count: number
}

export const fixedWindow: Twin<State> = {
  code: 1,
  check(state, nowUs, p, cost) {
    const nowMs = Math.floor(nowUs / 1000)
    const wid = Math.floor(nowMs / p.windowMs)
    const wend = (wid + 1) * p.windowMs
    const count = state && state.wid === wid ? state.count : 0
    const base = { wid, count }
    const remaining = Math.max(0, p.limit - count)
    const resetMs = count > 0 ? wend - nowMs : 0
    if (cost > p.limit) return { allowed: false, remaining, resetMs, retryMs: -1, tag: wid, base }
    if (count + cost <= p.limit) return { allowed: true, remaining, resetMs, retryMs: 0, tag: wid, base }
    return { allowed: false, remaining, resetMs, retryMs: wend - nowMs, tag: wid, base }
  },
  commit(c, nowUs, p, cost) {
    const nowMs = Math.floor(nowUs / 1000)
    const wend = (c.base.wid + 1) * p.windowMs
    c.remaining = p.limit - c.base.count - cost
    c.resetMs = wend - nowMs
    return { state: { wid: c.base.wid, count: c.base.count + cost }, expiresAtMs: wend }
  },
  refund(state, nowUs, p, tag, cost) {
    const nowWid = Math.floor(Math.floor(nowUs / 1000) / p.windowMs)
    if (cost < 0) {
      // a settlement charging more: into the spend's window while it lasts, past the limit if need be
      if (nowWid !== tag) return state && { state, expiresAtMs: (state.wid + 1) * p.windowMs }
      const count = Math.min((state?.wid === tag ? state.count : 0) - cost, Number.MAX_SAFE_INTEGER)
      return { state: { wid: tag, count }, expiresAtMs: (tag + 1) * p.windowMs }
    }
    if (!state || nowWid !== tag || state.wid !== tag)
      return state && { state, expiresAtMs: (state.wid + 1) * p.windowMs }
    const left = Math.max(0, state.count - cost)
    return left === 0 ? undefined : { state: { wid: tag, count: left }, expiresAtMs: (tag + 1) * p.windowMs }
  },
}
