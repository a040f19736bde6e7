/** Durations as the CLI prints and reads them, and its tables. */
import { formatDuration, parseHumanDuration, table } from './format'

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [850, '850ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [59_999, '59.999s'],
    [60_000, '1m'],
    [1_456_000, '24m16s'],
    // above a minute a fraction of a second rounds up: a reset is never shown earlier than it is
    [1_455_001, '24m16s'],
    [3_600_000, '1h'],
    [3_605_000, '1h5s'],
    [90_061_000, '1d1h1m1s'],
    [Number.POSITIVE_INFINITY, 'never'],
    [-1, 'never'],
  ])('%p ms is %p', (ms, text) => {
    expect(formatDuration(ms)).toBe(text)
  })
})

describe('parseHumanDuration', () => {
  it('reads what formatDuration prints, the core forms and bare milliseconds', () => {
    for (const ms of [850, 1500, 59_999, 60_000, 1_456_000, 3_605_000, 90_061_000]) {
      expect(parseHumanDuration(formatDuration(ms))).toBe(ms)
    }
    expect(parseHumanDuration('15m')).toBe(900_000)
    expect(parseHumanDuration('1.1s')).toBe(1100)
    expect(parseHumanDuration('250')).toBe(250)
  })
  it('refuses anything else', () => {
    for (const bad of ['', '1x', '1.5ms', 'm', '1m ', '-1s', '0.0001s'])
      expect(parseHumanDuration(bad)).toBeUndefined()
  })
})

describe('table', () => {
  it('aligns columns under a header row', () => {
    expect(
      table(
        ['POLICY', 'USED', 'KEY'],
        [
          ['ip', '12', 'k1'],
          ['account', '2', 'k2'],
        ],
      ),
    ).toEqual(['POLICY   USED  KEY', 'ip       12    k1', 'account  2     k2'])
  })
})
