/**
 * Every consume / peek answer goes out through here: shadow policies' refusals become `allowed` with
 * `decision.shadow`, and the decision is published on `tollgate:decision` if anyone listens.
 * @module
 */
import { monotonicMs } from '../deadlines'
import { DECISION_CHANNEL, type DecisionMessage } from '../events'
import type { Decision, StoreErrorPolicy } from '../types'
import type { PolicySet } from './policies'
import { shadowed } from './shadow'

/** Who answers: what the decision channel names. */
export interface Answering {
  readonly name: string
  readonly prefix: string
}

export function answer(
  limiter: Answering,
  set: PolicySet,
  operation: 'consume' | 'peek',
  decision: Decision,
  started: number,
  allShadow: boolean,
  failurePolicy?: StoreErrorPolicy,
): Decision {
  const names = set.shadowNames
  const out = allShadow || names !== undefined ? shadowed(decision, allShadow, names, set.names) : decision
  const channel = DECISION_CHANNEL
  if (channel?.hasSubscribers) {
    const message: DecisionMessage = {
      limiter: limiter.name,
      prefix: limiter.prefix,
      operation,
      decision: out,
      policies: set.names,
      algorithms: set.algorithms,
      failurePolicy: out.source === 'fallback' ? failurePolicy : undefined,
      durationMs: started === 0 ? 0 : monotonicMs() - started,
    }
    channel.publish(message)
  }
  return out
}
