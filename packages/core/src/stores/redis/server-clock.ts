/**
 * The act-by time a spending script call carries: the last server time (ms) at which it may still
 * change anything. A call whose caller stopped waiting (and was answered by the failure policy) is then
 * never applied by a script that starts later, whether the server was frozen or the network slow.
 * @module
 */
import { monotonicMs } from '../../deadlines'

/** The share of a deadline kept clear: a script starting in it acts no more, so its reply has that long to arrive. */
const MARGIN = 0.1

export class ServerClock {
  /**
   * Server ms minus monotonic ms, from the latest reply's TIME (NaN before the first). Read when the
   * reply is handled, after the script ran, so it can only put the server's clock early: the act-by it
   * gives errs towards refusing to act, never towards acting late.
   */
  private offset = Number.NaN

  /** A script's reply whose first element is its TIME in microseconds (consume, peek, batch). */
  learn(reply: unknown): void {
    if (!Array.isArray(reply)) return
    const us = Number(reply[0])
    if (us > 0) this.offset = us / 1000 - monotonicMs()
  }

  /** The act-by of a call whose caller waits `timeoutMs` from now, server ms; 0 (no bound) without one. */
  actBy(timeoutMs: number | undefined): number {
    const offset = this.offset
    if (timeoutMs === undefined || Number.isNaN(offset)) return 0
    return Math.floor(monotonicMs() + offset + timeoutMs * (1 - MARGIN))
  }
}
