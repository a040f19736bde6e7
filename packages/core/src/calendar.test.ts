/**
 * The calendar's boundaries against the platform's own zone rules (Intl): each boundary is checked to be
 * the first instant of its local day, on the right weekday or day of the month, in zones with DST
 * changes, a +5:45 offset and a 30-minute DST shift.
 */

import {
  CALENDAR_NOMINAL_MS,
  type CalendarUnit,
  calendarBoundaries,
  periodOf,
  periodsAround,
  resolveCalendar,
} from './calendar'
import { ConfigError } from './errors'

const H = 3_600_000

/** The local wall clock of `ms` in `timeZone`, by Intl: [year, month, day, hour, minute, weekday]. */
function wall(ms: number, timeZone: string): [number, number, number, number, number, string] {
  const f = new Intl.DateTimeFormat('en-US', {
    timeZone,
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    weekday: 'short',
    hourCycle: 'h23',
  })
  const p = Object.fromEntries(f.formatToParts(ms).map((x) => [x.type, x.value]))
  return [Number(p.year), Number(p.month), Number(p.day), Number(p.hour), Number(p.minute), p.weekday!]
}

const day = (ms: number, tz: string) => wall(ms, tz).slice(0, 3).join('-')
const b = (unit: CalendarUnit, timeZone: string, iso: string) =>
  calendarBoundaries({ unit, timeZone }, Date.parse(iso))

describe('calendarBoundaries', () => {
  it('every boundary is the first instant of its local day, in the right place of the calendar', () => {
    const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kathmandu', 'Australia/Lord_Howe']
    const units: CalendarUnit[] = ['day', 'week', 'month', 'year']
    // one instant every ten days through 2026 and 2028 (a leap year), in every zone and unit
    for (const year of [2026, 2028]) {
      for (let t = Date.UTC(year, 0, 1, 7); t < Date.UTC(year + 1, 0, 1); t += 10 * 24 * H + 5 * H) {
        for (const tz of zones) {
          for (const unit of units) {
            const bounds = calendarBoundaries({ unit, timeZone: tz }, t)
            expect(bounds[1]).toBeLessThanOrEqual(t)
            expect(bounds[2]).toBeGreaterThan(t)
            for (const x of bounds) {
              expect(day(x - 1, tz)).not.toBe(day(x, tz)) // a new local day starts exactly there
              const [, m, d, , , wd] = wall(x, tz)
              if (unit === 'week') expect(wd).toBe('Mon')
              if (unit === 'month' || unit === 'year') expect(d).toBe(1)
              if (unit === 'year') expect(m).toBe(1)
            }
          }
        }
      }
    }
  })

  it('a day lasts 23 or 25 hours across the March and October changes in Berlin', () => {
    const march = b('day', 'Europe/Berlin', '2026-03-29T10:00:00Z')
    expect(march[1]).toBe(Date.parse('2026-03-28T23:00:00Z'))
    expect(march[2] - march[1]).toBe(23 * H)
    const october = b('day', 'Europe/Berlin', '2026-10-25T10:00:00Z')
    expect(october[1]).toBe(Date.parse('2026-10-24T22:00:00Z'))
    expect(october[2] - october[1]).toBe(25 * H)
  })

  it('New York and Lord Howe (a 30-minute shift) have their own short days', () => {
    const ny = b('day', 'America/New_York', '2026-03-08T12:00:00Z')
    expect(ny[2] - ny[1]).toBe(23 * H)
    const lh = b('day', 'Australia/Lord_Howe', '2026-10-04T12:00:00Z')
    expect(lh[2] - lh[1]).toBe(23.5 * H)
  })

  it('February has 28 or 29 days, and months end at local midnight (Kathmandu, +5:45)', () => {
    const leap = b('month', 'UTC', '2028-02-10T00:00:00Z')
    expect(leap.slice(1, 3)).toEqual([Date.UTC(2028, 1, 1), Date.UTC(2028, 2, 1)])
    const plain = b('month', 'UTC', '2027-02-10T00:00:00Z')
    expect(plain[2] - plain[1]).toBe(28 * 24 * H)
    const ktm = b('month', 'Asia/Kathmandu', '2028-02-10T00:00:00Z')
    expect(ktm[1]).toBe(Date.parse('2028-01-31T18:15:00Z'))
    expect(ktm[2] - ktm[1]).toBe(29 * 24 * H)
    const jan = b('month', 'UTC', '2026-01-15T00:00:00Z')
    expect(jan[2] - jan[1]).toBe(31 * 24 * H)
  })

  it('ISO weeks start on Monday, also across a year end', () => {
    // 2026-12-31 is a Thursday: its week started on Monday 2026-12-28 and ends on Monday 2027-01-04
    const w = b('week', 'UTC', '2026-12-31T12:00:00Z')
    expect(w.slice(1, 3)).toEqual([Date.UTC(2026, 11, 28), Date.UTC(2027, 0, 4)])
    // a Monday just after midnight in Berlin is already the new week, still Sunday in UTC
    const berlin = b('week', 'Europe/Berlin', '2026-11-29T23:30:00Z')
    expect(berlin[1]).toBe(Date.parse('2026-11-29T23:00:00Z'))
  })

  it('a year ends at local midnight of January 1', () => {
    const y = b('year', 'America/New_York', '2026-12-31T23:00:00Z')
    expect(y.slice(1, 3)).toEqual([Date.parse('2026-01-01T05:00:00Z'), Date.parse('2027-01-01T05:00:00Z')])
    expect(b('year', 'UTC', '2028-06-01T00:00:00Z')[2] - Date.UTC(2028, 0, 1)).toBe(366 * 24 * H)
  })

  it('a zone that skips midnight starts its day when the clock jumps (Santiago)', () => {
    const d = b('day', 'America/Santiago', '2026-09-06T12:00:00Z')
    expect(d[1]).toBe(Date.parse('2026-09-06T04:00:00Z'))
    expect(wall(d[1], 'America/Santiago').slice(2, 5)).toEqual([6, 1, 0]) // 01:00, as 00:00 never happened
  })
})

describe('periodsAround and periodOf', () => {
  it('caches per calendar and moves on when the clock leaves the current period', () => {
    const c = { unit: 'day' as const, timeZone: 'UTC' }
    const t = Date.UTC(2030, 4, 5, 12)
    const first = periodsAround(c, t)
    expect(periodsAround(c, t + H)).toBe(first)
    const next = periodsAround(c, t + 24 * H)
    expect(next).not.toBe(first)
    expect(next.bounds[1]).toBe(first.bounds[2])
    expect(next.arg).toBe(next.bounds.join(','))
  })

  it('picks the period holding a time among the previous, current and next, or none', () => {
    const bounds = [0, 10, 20, 30] as const
    expect(periodOf(bounds, 5)).toEqual([0, 10])
    expect(periodOf(bounds, 20)).toEqual([20, 30])
    expect(periodOf(bounds, 30)).toBeUndefined()
    expect(periodOf(bounds, -1)).toBeUndefined()
  })
})

describe('resolveCalendar', () => {
  it('canonicalises the zone and defaults to UTC', () => {
    expect(resolveCalendar({ calendar: 'month' }, 'window')).toEqual({ unit: 'month', timeZone: 'UTC' })
    expect(resolveCalendar({ calendar: 'day', timeZone: 'europe/berlin' }, 'window').timeZone).toBe(
      'Europe/Berlin',
    )
    expect(CALENDAR_NOMINAL_MS.week).toBe(7 * 24 * H)
  })

  it.each([
    [{ calendar: 'fortnight' }, 'window.calendar'],
    [{ calendar: 'day', timeZone: 'Mars/Olympus' }, 'window.timeZone'],
    [{ calendar: 'day', timeZone: 5 }, 'window.timeZone'],
    [{ calendar: 'day', anchor: 17 }, 'window.anchor'],
  ])('refuses %p naming %s', (value, option) => {
    expect(() => resolveCalendar(value, 'window')).toThrow(ConfigError)
    expect(() => resolveCalendar(value, 'window')).toThrow(option)
  })
})
