/**
 * The act-by estimate of the server's clock: readings taken late (a lagging event loop) put the server
 * early, so the highest reading stands and a later, lower one does not pull the estimate down.
 */
import { monotonicMs } from '../../deadlines'
import { ServerClock } from './server-clock'

/** A reply whose TIME puts the server `offsetMs` ahead of this process's monotonic clock now. */
const reply = (offsetMs: number) => [String(Math.round((monotonicMs() + offsetMs) * 1000)), 1]

/**
 * `clock.actBy(1000)` taken after `learn` runs, and the monotonic times just before and just after. A
 * reading learned late lowers the estimate by that lateness, never more, so with the server `ahead` ms
 * ahead the result lies in [before + ahead + 900, after + ahead + 900] however slow the machine is.
 */
function actByAround(clock: ServerClock, learn: () => void) {
  const before = monotonicMs()
  learn()
  const actBy = clock.actBy(1000)
  return { actBy, before, after: monotonicMs() }
}

/** Date.now() + 900 at some moment of `read`, within a ms of rounding. */
function expectWallClockEstimate(read: () => number) {
  const before = Date.now()
  const actBy = read()
  const after = Date.now()
  expect(actBy).toBeGreaterThanOrEqual(before + 900 - 2)
  expect(actBy).toBeLessThanOrEqual(after + 900 + 2)
}

it("takes the wall clock until a reply, then the reply's reading, plus nine tenths of the deadline", () => {
  const clock = new ServerClock()
  expectWallClockEstimate(() => clock.actBy(1000))
  const { actBy, before, after } = actByAround(clock, () => clock.learn(reply(1_000_000)))
  expect(actBy).toBeGreaterThanOrEqual(Math.floor(before + 1_000_900))
  expect(actBy).toBeLessThanOrEqual(after + 1_000_900)
  expect(clock.actBy(undefined)).toBe(0)
})

it('keeps the highest reading against a later one taken by a lagging event loop', () => {
  const clock = new ServerClock()
  // Kept: the estimate stays at or above the first reading's, 400 ms above the lagging one's.
  const first = actByAround(clock, () => {
    clock.learn(reply(1_000_000))
    clock.learn(reply(1_000_000 - 400)) // read 400 ms after the script ran
  })
  expect(first.actBy).toBeGreaterThanOrEqual(Math.floor(first.before + 1_000_900))
  const closer = actByAround(clock, () => clock.learn(reply(1_000_000 + 200))) // a closer reading replaces it
  expect(closer.actBy).toBeGreaterThanOrEqual(Math.floor(closer.before + 1_001_100))
  expect(closer.actBy).toBeLessThanOrEqual(closer.after + 1_001_100)
})

it('ignores a reply without a server time', () => {
  const clock = new ServerClock()
  clock.learn(null)
  clock.learn(['0', 1])
  clock.learn('OK')
  expectWallClockEstimate(() => clock.actBy(1000))
})

it('lets the first reading replace the wall clock even when it is lower', () => {
  const clock = new ServerClock()
  const before = Date.now()
  clock.learn(reply(Date.now() - monotonicMs() - 60_000)) // a server a minute behind this process
  const actBy = clock.actBy(1000)
  const after = Date.now()
  expect(actBy).toBeGreaterThanOrEqual(before - 60_000 + 900 - 2)
  expect(actBy).toBeLessThanOrEqual(after - 60_000 + 900 + 2)
})
