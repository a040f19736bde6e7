/**
 * The reserve as two stages: a call its units cover is drawn from them before anything else (no round
 * trip); one they cannot cover, once the deny cache let it through, refills them in place of the
 * limiter's own store call. See reserve.ts and docs/reserve.md.
 * @module
 */
import type { Decision, PairCost, RefundToken } from '../types'
import { decide } from './decision'
import type { Refill, Reserves } from './reserve'
import type { Call, Stage } from './stage'
import type { StorePath } from './store-path'

/** The stage that draws from the units on hand; first of all stages. */
export class ReserveDraw implements Stage {
  constructor(private readonly reserves: Reserves) {}

  before(call: Call): Decision | undefined {
    // a call the reserve cannot hold (per-call limits, a larger cost) goes to the store, exact
    call.reserved = this.reserves.covers(call.cost, call.options)
    if (!call.reserved) return undefined
    return this.reserves.draw(call.entries, call.signature, call.cost, call.started)
  }

  /** A store peek with this process's units counted as remaining. */
  peeked(call: Call, decision: Decision): Decision {
    if (!this.reserves.covers(call.cost, call.options)) return decision
    return this.reserves.peeked(decision, call.signature, call.cost)
  }

  refunded(decision: Decision, token: RefundToken, cost: PairCost): void {
    if (decision.source === 'reserve') this.reserves.refunded(token, cost)
  }

  forget(signature: string): void {
    this.reserves.drop(signature)
  }
}

/**
 * The stage that takes units from the store for a reserved call the units on hand could not cover (or
 * waits for the key's refill in flight): its answer is the call's. The failure policy answers when the
 * store fails.
 */
export class ReserveTake implements Stage {
  constructor(
    private readonly reserves: Reserves,
    private readonly via: StorePath,
  ) {}

  before(call: Call): Promise<Decision> | undefined {
    return call.reserved ? this.take(call) : undefined
  }

  private async take(call: Call): Promise<Decision> {
    const { via } = this
    const { entries, cost } = call
    const refill: Refill = {
      consume: (units) =>
        via.calls.run(
          entries,
          () => via.store.consume(entries, units, via.calls.deadlines.timeoutMs),
          'consume',
        ),
      refused: (reply, units) => decide(via.ctx, entries, units, reply, true, 'store'),
    }
    try {
      return await this.reserves.take(entries, call.signature, cost, call.started, refill)
    } catch (error) {
      return via.fallback.decide(error, entries, cost, call.policy, true)
    }
  }
}
