/**
 * Calendar windows: a fixed window that follows the calendar (day, ISO week, month, year) in an IANA
 * time zone. The zone's rules come from the platform (`Intl.DateTimeFormat`), never from a table here.
 * The client only proposes boundaries: the script reads Redis' clock and picks the period containing it
 * among the ones sent (see lua/algorithms/calendar.lua).
 * @module
 */
import { ConfigError } from './errors'

/** The periods a calendar window can follow. Weeks start on Monday 00:00 local time (ISO 8601). */
export type CalendarUnit = 'day' | 'week' | 'month' | 'year'

/** A calendar window: `{ calendar: 'month', timeZone: 'Europe/Berlin' }`. */
export interface CalendarWindow {
  /** The period a count lasts: it resets at the start of each. */
  calendar: CalendarUnit
  /** An IANA time zone name. @default 'UTC' */
  timeZone?: string
}

/**
 * A validated calendar window: the zone as the platform names it canonically. Where periods start is
 * decided by `periodDay` alone (the script and the twin take whatever boundaries it gives): an anchor
 * day, such as a customer's billing day, belongs here and there.
 */
export interface ResolvedCalendar {
  readonly unit: CalendarUnit
  readonly timeZone: string
  /**
   * A month's first day, 1 to 31 (a customer's billing day, set through an override): the period runs
   * from that day, or the month's last day when shorter, to the same day of the next month. Absent: the 1st.
   */
  readonly anchor?: number
}

/**
 * Each unit's nominal length, the policy's `windowMs` (the `w` of RateLimit-Policy, key signatures,
 * descriptions). The real period may be shorter or longer (DST days, months of 28 to 31 days); the
 * numbers of a decision (`resetMs`, `retryAfterMs`) always count to the real end.
 */
export const CALENDAR_NOMINAL_MS: Readonly<Record<CalendarUnit, number>> = {
  day: 86_400_000,
  week: 604_800_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
}

const UNITS = Object.keys(CALENDAR_NOMINAL_MS) as CalendarUnit[]

/** Whether a `window` option is a calendar window (an object), not a duration. */
export function isCalendarWindow(value: unknown): value is CalendarWindow {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const FORMATTERS = new Map<string, Intl.DateTimeFormat>()

/** A formatter of the local civil date in `timeZone` (one per zone: building one costs far more than using it). */
function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = FORMATTERS.get(timeZone)
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      calendar: 'gregory',
      numberingSystem: 'latn',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      era: 'short',
    })
    FORMATTERS.set(timeZone, f)
  }
  return f
}

/** Validates a `window: { calendar, timeZone }` option; `option` is its path (`policies.monthly.window`). */
export function resolveCalendar(value: unknown, option: string): ResolvedCalendar {
  const o = value as Record<string, unknown>
  for (const k of Object.keys(o)) {
    if (k !== 'calendar' && k !== 'timeZone') {
      throw new ConfigError(`${option}.${k}`, 'unset (a calendar window takes calendar and timeZone)', o[k])
    }
  }
  if (typeof o.calendar !== 'string' || !(UNITS as string[]).includes(o.calendar)) {
    throw new ConfigError(`${option}.calendar`, "one of 'day', 'week', 'month', 'year'", o.calendar)
  }
  const zone = o.timeZone ?? 'UTC'
  if (typeof zone !== 'string' || zone.length === 0 || zone.length > 64) {
    throw new ConfigError(`${option}.timeZone`, "an IANA time zone name such as 'Europe/Berlin'", zone)
  }
  let timeZone: string
  try {
    timeZone = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone
  } catch {
    throw new ConfigError(`${option}.timeZone`, "an IANA time zone name such as 'Europe/Berlin'", zone)
  }
  return { unit: o.calendar as CalendarUnit, timeZone }
}

/** A civil date as one comparable number, y * 10000 + m * 100 + d. */
type DayNumber = number

/** The civil date that `ms` (epoch) falls on in `timeZone`. */
function localDay(ms: number, timeZone: string): DayNumber {
  let y = 0
  let m = 0
  let d = 0
  let bc = false
  for (const part of formatter(timeZone).formatToParts(ms)) {
    if (part.type === 'year') y = Number(part.value)
    else if (part.type === 'month') m = Number(part.value)
    else if (part.type === 'day') d = Number(part.value)
    else if (part.type === 'era') bc = part.value.startsWith('B')
  }
  return (bc ? 1 - y : y) * 10_000 + m * 100 + d
}

/** The civil date `days` after (y, m, d), by the proleptic Gregorian calendar (no zone involved). */
function addDays(y: number, m: number, d: number, days: number): DayNumber {
  const t = new Date(0)
  t.setUTCFullYear(y, m - 1, d + days)
  return t.getUTCFullYear() * 10_000 + (t.getUTCMonth() + 1) * 100 + t.getUTCDate()
}

/**
 * The first instant (epoch ms) whose local date in `timeZone` is `day` or later: the start of that
 * day, 00:00 local, or the end of the DST gap where a zone skips midnight. Found by bisection over the
 * zone's own answers, so no offset rule is assumed beyond offsets lying within +-15 hours.
 */
function startOfDay(day: DayNumber, timeZone: string): number {
  const y = Math.floor(day / 10_000)
  const m = Math.floor(day / 100) % 100
  const d = day % 100
  const t = new Date(0)
  t.setUTCFullYear(y, m - 1, d)
  const utc = t.getTime()
  let lo = utc - 15 * 3_600_000 // local date before `day` here
  let hi = utc + 15 * 3_600_000 // and `day` or later here
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2)
    if (localDay(mid, timeZone) >= day) hi = mid
    else lo = mid
  }
  return hi
}

/**
 * The first day of the period `n` periods after the one of `unit` holding `day` (n = 0: its own). The
 * one place that says where periods start: a month anchored on another day than the 1st starts here.
 */
function periodDay(unit: CalendarUnit, day: DayNumber, n: number, anchor = 1): DayNumber {
  const y = Math.floor(day / 10_000)
  const m = Math.floor(day / 100) % 100
  const d = day % 100
  if (unit === 'month' && anchor > 1) {
    // the anchored period holding `day` starts this month, or last month before the anchor day
    const months = y * 12 + (m - 1) + n - (d < anchorIn(y * 12 + m - 1, anchor) ? 1 : 0)
    return Math.floor(months / 12) * 10_000 + ((months % 12) + 1) * 100 + anchorIn(months, anchor)
  }
  switch (unit) {
    case 'day':
      return addDays(y, m, d, n)
    case 'week': {
      const t = new Date(0)
      t.setUTCFullYear(y, m - 1, d)
      const sinceMonday = (t.getUTCDay() + 6) % 7
      return addDays(y, m, d, 7 * n - sinceMonday)
    }
    case 'month': {
      const months = y * 12 + (m - 1) + n
      return Math.floor(months / 12) * 10_000 + ((months % 12) + 1) * 100 + 1
    }
    case 'year':
      return (y + n) * 10_000 + 101
  }
}

/** The days of month `months` (y * 12 + m - 1), by the proleptic Gregorian calendar. */
function daysIn(months: number): number {
  const t = new Date(0)
  t.setUTCFullYear(Math.floor(months / 12), (months % 12) + 1, 0) // day 0 of the next month
  return t.getUTCDate()
}

/** An anchor day within month `months`: the anchor, or the month's last day when the month is shorter. */
function anchorIn(months: number, anchor: number): number {
  return Math.min(anchor, daysIn(months))
}

/**
 * The period boundaries around `nowMs` (epoch ms): the starts of the previous, the current and the next
 * period and the end of the next, ascending. What the script picks Redis' time from.
 *
 * @example
 * calendarBoundaries({ unit: 'month', timeZone: 'UTC' }, Date.UTC(2028, 1, 10))
 * // [Date.UTC(2028, 0, 1), Date.UTC(2028, 1, 1), Date.UTC(2028, 2, 1), Date.UTC(2028, 3, 1)]
 */
export function calendarBoundaries(c: ResolvedCalendar, nowMs: number): [number, number, number, number] {
  const today = localDay(nowMs, c.timeZone)
  const at = (n: number) => startOfDay(periodDay(c.unit, today, n, c.anchor), c.timeZone)
  return [at(-1), at(0), at(1), at(2)]
}

const DAY_MS = 86_400_000

/** The epoch day (days since 1970-01-01) of a civil date. */
function epochDay(day: DayNumber): number {
  const t = new Date(0)
  t.setUTCFullYear(Math.floor(day / 10_000), (Math.floor(day / 100) % 100) - 1, day % 100)
  return Math.round(t.getTime() / DAY_MS)
}

/** The civil date of an epoch day. */
function civilDay(epoch: number): DayNumber {
  const t = new Date(epoch * DAY_MS)
  return t.getUTCFullYear() * 10_000 + (t.getUTCMonth() + 1) * 100 + t.getUTCDate()
}

/**
 * What a script needs to start a month on any day (a billing day read from an override, unknown here):
 * `|<months>|<day>:<offset>,...`, where `<months>` is y * 12 + m - 1 of the month two before the current
 * one, and each `<day>:<offset>` says that from that epoch day on, a day starts `offset` ms before its
 * UTC midnight (the zone's offset at its local midnight, or where its clock jumps past one), through
 * the month two after the current one. The offsets come from the platform's zone rules, sampled weekly
 * and bisected where they change; the script does only Gregorian arithmetic with them.
 */
function anchorTable(c: ResolvedCalendar, currentStart: number): string {
  const current = localDay(currentStart, c.timeZone)
  const months = Math.floor(current / 10_000) * 12 + (Math.floor(current / 100) % 100) - 1 - 2
  const first = epochDay(Math.floor(months / 12) * 10_000 + ((months % 12) + 1) * 100 + 1)
  const last = first + 160 // past the last day of the fifth month
  const offset = (epoch: number) => epoch * DAY_MS - startOfDay(civilDay(epoch), c.timeZone)
  const runs: string[] = []
  let from = first
  let off = offset(first)
  runs.push(`${first}:${off}`)
  // the first day from `lo` (whose offset is known) to `hi` whose offset differs, found by bisection
  const change = (lo: number, hi: number, at: number): number => {
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2)
      if (offset(mid) === at) lo = mid
      else hi = mid
    }
    return hi
  }
  while (from < last) {
    const next = Math.min(from + 7, last)
    const o = offset(next)
    if (o === off) {
      from = next
      continue
    }
    const day = change(from, next, off)
    off = offset(day)
    runs.push(`${day}:${off}`)
    from = day
  }
  return `|${months}|${runs.join(',')}`
}

const ANCHORED = new WeakMap<ResolvedCalendar, Map<number, ResolvedCalendar>>()

/** `c` started on day `anchor` of each month (a billing day): one object per pair, as `periodsAround` caches by object. */
export function withAnchor(c: ResolvedCalendar, anchor: number): ResolvedCalendar {
  if (anchor === 1) return c
  let byDay = ANCHORED.get(c)
  if (byDay === undefined) {
    byDay = new Map()
    ANCHORED.set(c, byDay)
  }
  let out = byDay.get(anchor)
  if (out === undefined) {
    out = { ...c, anchor }
    byDay.set(anchor, out)
  }
  return out
}

/** Boundaries computed once and reused while the clock stays in their current period. */
interface Cached {
  readonly bounds: readonly [number, number, number, number]
  /** The bounds as the scripts' window argument: `b0,b1,b2,b3`, then for a month its anchor table. */
  readonly arg: string
}

/** Per resolved calendar (one per policy, made once): no key to build per call, nothing kept past it. */
let CACHE = new WeakMap<ResolvedCalendar, Cached>()

/**
 * A source of boundaries: `calendarBoundaries` by default. A test may place a period's end where it
 * needs one (next to Redis' time) without a clock inside Lua. @internal
 */
export type BoundaryProvider = (c: ResolvedCalendar, nowMs: number) => [number, number, number, number]

let provider: BoundaryProvider = calendarBoundaries

/** Replaces the boundary source (tests only); `undefined` restores the calendar's. @internal */
export function setBoundaryProvider(next: BoundaryProvider | undefined): void {
  provider = next ?? calendarBoundaries
  CACHE = new WeakMap()
}

/**
 * The boundaries around `nowMs`, cached per calendar: recomputed only when `nowMs` leaves the cached
 * current period, so a call costs a map lookup and two comparisons, not the zone's rules.
 */
export function periodsAround(c: ResolvedCalendar, nowMs: number): Cached {
  let cached = CACHE.get(c)
  if (cached === undefined || nowMs < cached.bounds[1] || nowMs >= cached.bounds[2]) {
    const bounds = provider(c, nowMs)
    const table = c.unit === 'month' && c.anchor === undefined ? anchorTable(c, bounds[1]) : ''
    cached = { bounds, arg: bounds.join(',') + table }
    CACHE.set(c, cached)
  }
  return cached
}

/**
 * The period [start, end) of `bounds` that holds `nowMs`, or undefined when none does (the clocks are
 * further apart than a period). The twin of calendar.lua's choice.
 */
export function periodOf(
  bounds: readonly [number, number, number, number],
  nowMs: number,
): [number, number] | undefined {
  for (let i = 0; i < 3; i++) {
    if (nowMs >= bounds[i]! && nowMs < bounds[i + 1]!) return [bounds[i]!, bounds[i + 1]!]
  }
  return undefined
}
