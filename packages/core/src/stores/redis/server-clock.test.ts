/**
 * The act-by estimate of the server's clock: readings taken late (a lagging event loop) put the server
 * early, so the highest reading stands and a later, lower one does not pull the estimate down.
 */
import { monotonicMs } from '../../deadlines'
import { ServerClock } from './server-clock'

/** A reply whose TIME puts the server `offsetMs` ahead of this process's monotonic clock now. */
const reply = (offsetMs: number) => [String(Math.round((monotonicMs() + offsetMs) * 1000)), 1]

it("takes the wall clock until a reply, then the reply's reading, plus nine tenths of the deadline", () => {
  const clock = new ServerClock()
  expect(Math.abs(clock.actBy(1000) - (Date.now() + 900))).toBeLessThan(5)
  clock.learn(reply(1_000_000))
  const actBy = clock.actBy(1000)
  const expected = monotonicMs() + 1_000_000 + 900
  expect(Math.abs(actBy - expected)).toBeLessThan(5)
  expect(clock.actBy(undefined)).toBe(0)
})

it('keeps the highest reading against a later one taken by a lagging event loop', () => {
  const clock = new ServerClock()
  clock.learn(reply(1_000_000))
  clock.learn(reply(1_000_000 - 400)) // read 400 ms after the script ran
  expect(clock.actBy(1000) - (monotonicMs() + 1_000_000 + 900)).toBeGreaterThan(-5)
  clock.learn(reply(1_000_000 + 200)) // a closer reading replaces it
  expect(clock.actBy(1000) - (monotonicMs() + 1_000_200 + 900)).toBeGreaterThan(-5)
})

it('ignores a reply without a server time', () => {
  const clock = new ServerClock()
  clock.learn(null)
  clock.learn(['0', 1])
  clock.learn('OK')
  expect(Math.abs(clock.actBy(1000) - (Date.now() + 900))).toBeLessThan(5)
})

it('lets the first reading replace the wall clock even when it is lower', () => {
  const clock = new ServerClock()
  clock.learn(reply(Date.now() - monotonicMs() - 60_000)) // a server a minute behind this process
  expect(Math.abs(clock.actBy(1000) - (Date.now() - 60_000 + 900))).toBeLessThan(5)
})
