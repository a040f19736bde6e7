/**
 * The decision path of `consume` and `peek`: the stages' `before` hooks, the one store call (whose
 * failure the failure policy answers), the stages' `after` hooks in reverse, and the answer.
 * @module
 */
import type { Decision, StoreReply } from '../types'
import { type Answering, answer } from './answer'
import { decide } from './decision'
import type { PolicySet } from './policies'
import type { Call, Stage } from './stage'
import { type StoreCalls, WatchedCall } from './store-calls'
import type { StorePath } from './store-path'

export class Pipeline {
  private readonly before: readonly Stage[]
  private readonly after: readonly Stage[]
  private readonly peeked: readonly Stage[]
  private readonly refused: readonly Stage[]

  constructor(
    /** In order: the first `before` hook runs first, the first `after` hook last. */
    readonly stages: readonly Stage[],
    private readonly via: StorePath,
    private readonly who: Answering,
    private readonly set: PolicySet,
  ) {
    this.before = stages.filter((s) => s.before !== undefined)
    this.after = stages.filter((s) => s.after !== undefined).reverse()
    this.peeked = stages.filter((s) => s.peeked !== undefined)
    this.refused = stages.filter((s) => s.refused !== undefined)
  }

  consume(call: Call): Promise<Decision> {
    for (const stage of this.before) {
      const early = stage.before!(call)
      if (early === undefined) continue
      if (early instanceof Promise) return early.then((d) => this.answer('consume', call, d))
      return Promise.resolve(this.answer('consume', call, early))
    }
    return this.fromStore(call)
  }

  async peek(call: Call): Promise<Decision> {
    const { entries, cost } = call
    const { calls, store } = this.via
    let reply: StoreReply
    try {
      reply = await calls.run(entries, () => store.peek(entries, cost), 'peek')
    } catch (error) {
      const fallback = await this.via.fallback.decide(error, entries, cost, call.policy, false)
      return this.answer('peek', call, fallback)
    }
    let decision = decide(this.via.ctx, entries, cost, reply, false, 'store')
    for (const stage of this.peeked) decision = stage.peeked!(call, decision)
    return this.answer('peek', call, decision)
  }

  /**
   * The store's decision, through the stages' `after` hooks; the failure policy's if the store fails.
   * The store call settles this promise itself ({@link StoreConsume}): no promise between the two.
   * The deadline counts from `call.started`, read just before (no stage before it waited).
   */
  private fromStore(call: Call): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      const calls = this.via.calls
      calls.consume(new StoreConsume(this, calls, call, resolve, reject), call.cost, call.started)
    })
  }

  /** @internal The store's reply made the answer. */
  decided(call: Call, reply: StoreReply): Decision | Promise<Decision> {
    let decision = decide(this.via.ctx, call.entries, call.cost, reply, true, 'store')
    const after = this.after
    for (let i = 0; i < after.length; i++) {
      const out = after[i]!.after!(call, decision)
      if (out instanceof Promise) return this.afterFrom(call, out, i + 1)
      decision = out
    }
    return this.answer('consume', call, decision)
  }

  /** The rest of the `after` hooks, once one of them answered with a promise. */
  private async afterFrom(call: Call, pending: Promise<Decision>, next: number): Promise<Decision> {
    let decision = await pending
    for (let i = next; i < this.after.length; i++) {
      const out = this.after[i]!.after!(call, decision)
      decision = out instanceof Promise ? await out : out
    }
    return this.answer('consume', call, decision)
  }

  /** @internal The failure policy's answer. */
  async failed(call: Call, error: unknown): Promise<Decision> {
    const fallback = await this.via.fallback.decide(error, call.entries, call.cost, call.policy, true)
    return this.answer('consume', call, fallback)
  }

  private answer(operation: 'consume' | 'peek', call: Call, decision: Decision): Decision {
    const out = answer(this.who, this.set, operation, decision, call.started, call.allShadow, call.policy)
    if (!out.allowed && operation === 'consume') for (const stage of this.refused) stage.refused!(call, out)
    return out
  }
}

/** A consume's store call, settling the pipeline's promise with the decision or the failure policy's. */
class StoreConsume extends WatchedCall<StoreReply> {
  constructor(
    private readonly pipeline: Pipeline,
    calls: StoreCalls,
    private readonly call: Call,
    private readonly resolve: (decision: Decision | Promise<Decision>) => void,
    private readonly rejectWith: (error: unknown) => void,
  ) {
    super(calls, call.entries)
  }

  answered(reply: StoreReply): void {
    try {
      this.resolve(this.pipeline.decided(this.call, reply))
    } catch (error) {
      this.rejectWith(error)
    }
  }

  failed(error: unknown): void {
    this.resolve(this.pipeline.failed(this.call, error))
  }
}
