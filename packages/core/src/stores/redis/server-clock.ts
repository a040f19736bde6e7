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
  /** How long after it is sent a call may act: the shortest deadline told, less its margin. */
  private within = Number.POSITIVE_INFINITY

  /** A limiter's `timeoutMs`: the store's calls act within the shortest one told. */
  useDeadline(timeoutMs: number): void {
    this.within = Math.min(this.within, timeoutMs * (1 - MARGIN))
  }

  /** A script's reply whose first element is its TIME in microseconds (consume, peek, batch). */
  learn(reply: unknown): void {
    if (!Array.isArray(reply)) return
    const us = Number(reply[0])
    if (us > 0) this.offset = us / 1000 - monotonicMs()
  }

  /** The act-by of a call sent now, server ms; 0 (no bound) before the first reply or any deadline. */
  actBy(): number {
    const offset = this.offset
    if (Number.isNaN(offset) || this.within === Number.POSITIVE_INFINITY) return 0
    return Math.floor(monotonicMs() + offset + this.within)
  }
}
