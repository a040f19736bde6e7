/**
 * The act-by time a spending script call carries: the last server time (ms) at which it may still
 * change anything. A call whose caller stopped waiting (and was answered by the failure policy) is then
 * never applied by a script that starts later, whether the server was frozen or the network slow.
 * @module
 */
import { monotonicMs } from '../../deadlines'

/** The share of a deadline kept clear: a script starting in it acts no more, so its reply has that long to arrive. */
const MARGIN = 0.1

/** How long the best offset seen stands before a later reply's may replace it even if lower (ms). */
const OFFSET_LIFE_MS = 5000

export class ServerClock {
  /**
   * Server ms minus monotonic ms. Each reply's TIME is read when the reply is handled, after the script
   * ran and however late the event loop got to it, so every reading puts the server's clock early, never
   * late: the highest is the closest. It stands for a few seconds, so a server clock stepped back is
   * followed, and a lagging event loop's readings cannot pull it down. Until the first reply, this
   * process's wall clock stands in (servers and apps keep time by NTP); the first reading replaces it.
   */
  private offset = Date.now() - monotonicMs()
  private offsetAt = Number.NEGATIVE_INFINITY

  /** A script's reply whose first element is its TIME in microseconds (consume, peek, batch). */
  learn(reply: unknown): void {
    if (!Array.isArray(reply)) return
    const us = Number(reply[0])
    if (!(us > 0)) return
    const now = monotonicMs()
    const offset = us / 1000 - now
    if (offset >= this.offset || now - this.offsetAt >= OFFSET_LIFE_MS) {
      this.offset = offset
      this.offsetAt = now
    }
  }

  /**
   * The act-by of a call whose caller waits `timeoutMs` from now (`nowMs`, a monotonic reading the caller
   * just took; 0: read here), server ms; 0 (no bound) without one.
   */
  actBy(timeoutMs: number | undefined, nowMs = 0): number {
    if (timeoutMs === undefined) return 0
    return Math.floor((nowMs > 0 ? nowMs : monotonicMs()) + this.offset + timeoutMs * (1 - MARGIN))
  }
}
