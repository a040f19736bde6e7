/**
 * calendar: a count per calendar period (day, ISO week, month, year) in a time zone. Twin of
 * `lua/algorithms/calendar.lua`: the same boundaries (calendar.ts), the period holding the store's
 * clock, and the tag the period's end.
 * @module
 */
import { periodOf, periodsAround } from '../calendar'
import { StoreError } from '../errors'
import type { ResolvedPolicy } from '../types'
import type { Twin } from './types'

interface State {
  /** The end (epoch ms) of the period the count belongs to. */
  end: number
  count: number
}

/** The period [start, end) holding `nowMs`, or undefined when the boundaries miss it. */
function find(p: ResolvedPolicy, nowMs: number): [number, number] | undefined {
  return periodOf(periodsAround(p.calendar!, nowMs).bounds, nowMs)
}

function period(p: ResolvedPolicy, nowMs: number): [number, number] {
  const found = find(p, nowMs)
  if (found === undefined) {
    throw new StoreError(
      'tollgate calendar: server time outside the periods sent (clocks apart by more than a period)',
    )
  }
  return found
}

export const calendar: Twin<State> = {
  code: 9,
  check(state, nowUs, p, cost) {
    const nowMs = Math.floor(nowUs / 1000)
    const [start, end] = period(p, nowMs)
    // under a billing day, a count whose period ends near this one's is this one's (as cal_ends): a
    // changed day moves the end
    const ours =
      state && (p.calendar!.anchor ? Math.abs(state.end - end) < (end - start) / 2 : state.end === end)
    const count = ours ? state.count : 0
    const base = { end, count }
    const remaining = Math.max(0, p.limit - count)
    const resetMs = count > 0 ? end - nowMs : 0
    if (cost > p.limit) return { allowed: false, remaining, resetMs, retryMs: -1, tag: end, base }
    if (count + cost <= p.limit) return { allowed: true, remaining, resetMs, retryMs: 0, tag: end, base }
    return { allowed: false, remaining, resetMs, retryMs: end - nowMs, tag: end, base }
  },
  commit(c, nowUs, p, cost) {
    const nowMs = Math.floor(nowUs / 1000)
    c.remaining = p.limit - c.base.count - cost
    c.resetMs = c.base.end - nowMs
    return { state: { end: c.base.end, count: c.base.count + cost }, expiresAtMs: c.base.end }
  },
  // The tag is the spend's period end (as calendar.lua): whether that period still runs, whatever
  // billing day the refund's own policy would start it on.
  refund(state, nowUs, _p, tag, cost) {
    const kept = state && { state, expiresAtMs: state.end }
    if (Math.floor(nowUs / 1000) >= tag) return kept // the spend's period is over: nothing to give back
    if (cost < 0) {
      // a settlement charging more: into the spend's period while it lasts, past the limit if need be
      const count = Math.min((state?.end === tag ? state.count : 0) - cost, Number.MAX_SAFE_INTEGER)
      return { state: { end: tag, count }, expiresAtMs: tag }
    }
    if (!state || state.end !== tag) return kept
    const left = Math.max(0, state.count - cost)
    return left === 0 ? undefined : { state: { end: tag, count: left }, expiresAtMs: tag }
  },
}
