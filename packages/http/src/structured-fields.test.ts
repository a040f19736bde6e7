import {
  boundedMs,
  ceilSeconds,
  SF_INTEGER_MAX,
  sfInteger,
  sfString,
  windowSeconds,
} from './structured-fields'

describe('structured field values (RFC 9651)', () => {
  it('quotes sf-strings, escaping " and \\ only', () => {
    expect(sfString('burst')).toBe('"burst"')
    expect(sfString('')).toBe('""')
    expect(sfString('\\')).toBe('"\\\\"')
    expect(sfString('a"b\\c')).toBe('"a\\"b\\\\c"')
  })

  it('refuses text an sf-string cannot hold (header injection, non-ASCII)', () => {
    expect(() => sfString('a\r\nSet-Cookie: x')).toThrow(TypeError)
    expect(() => sfString('é')).toThrow(TypeError)
    expect(() => sfString('tab\there')).toThrow(TypeError)
  })

  it('sf-integers are never negative, fractional or over 15 digits', () => {
    expect(sfInteger(2.7)).toBe(2)
    expect(sfInteger(-3)).toBe(0)
    expect(sfInteger(Number.NaN)).toBe(0)
    expect(sfInteger(1e20)).toBe(SF_INTEGER_MAX)
    expect(String(SF_INTEGER_MAX)).toHaveLength(15)
  })

  it('rounds durations up to whole seconds, a window to at least 1', () => {
    expect(ceilSeconds(0)).toBe(0)
    expect(ceilSeconds(1)).toBe(1)
    expect(ceilSeconds(1000)).toBe(1)
    expect(ceilSeconds(1001)).toBe(2)
    expect(ceilSeconds(-5)).toBe(0)
    expect(ceilSeconds(Infinity)).toBe(SF_INTEGER_MAX)
    expect(windowSeconds(0)).toBe(1)
    expect(windowSeconds(1500)).toBe(2)
  })

  it('bounds a duration for arithmetic (no NaN, no Infinity)', () => {
    expect(boundedMs(Number.NaN)).toBe(0)
    expect(boundedMs(-1)).toBe(0)
    expect(boundedMs(250)).toBe(250)
    expect(boundedMs(Infinity)).toBe(SF_INTEGER_MAX)
  })
})
