/**
 * What every server's plugin shares: price the operation, spend it in one limiter call, build the
 * refusal error and the headers, and settle the actual cost after execution.
 * @module
 */

import type { Decision, KeyInput } from '@tollgate/core'
import { canonicalIp, rateLimitHeaders } from '@tollgate/http'
import { type FormattedExecutionResult, GraphQLError, type GraphQLSchema } from 'graphql'
import { actualCost, bindOperation, costError, estimateCost, type PricedOperation } from './cost'
import { checkOptions, type GraphQLOperation, type GraphQLRateLimitOptions } from './options'

/** An admitted operation: its decision, what was spent, the headers to send. */
export interface Admission {
  readonly decision: Decision
  readonly operation: GraphQLOperation
  readonly priced: PricedOperation | undefined
  readonly headers: Record<string, string>
}

/** What the plugins call: `admit` before execution, `settle` after. */
export interface Gate {
  /** The admission, or the GraphQLError to answer with (invalid, too costly, refused). */
  admit(schema: GraphQLSchema, operation: GraphQLOperation): Promise<Admission | GraphQLError>
  settle(admission: Admission, result: FormattedExecutionResult): Promise<void>
}

let warnedAnonymous = false

/** The client address the usual servers put in the context: node's request, Fastify's reply. */
function clientAddress(context: unknown): string | undefined {
  const c = context as {
    req?: { socket?: { remoteAddress?: string } }
    reply?: { request?: { ip?: string } }
  } | null
  return c?.req?.socket?.remoteAddress ?? c?.reply?.request?.ip
}

function defaultKey(context: unknown): KeyInput {
  const address = clientAddress(context)
  if (address) return canonicalIp(address)
  if (!warnedAnonymous) {
    warnedAnonymous = true
    console.warn(
      '@tollgate/graphql: no client address in the GraphQL context (no `req` socket or Fastify `reply`); ' +
        "every such client shares the 'anonymous' budget. Pass `key` to choose the identity.",
    )
  }
  return 'anonymous'
}

const finite = (ms: number): number | null => (Number.isFinite(ms) ? ms : null)

/** The refusal: a GraphQL error with the numbers, and the HTTP status and headers for servers that use them. */
export function refusalError(decision: Decision, headers: Record<string, string>): GraphQLError {
  const unavailable = decision.source === 'fallback' && decision.policies.length === 0
  // an outage refusal with no breaker cool-down yet still asks for a pause, never an immediate retry loop
  const retryAfterMs = unavailable ? Math.max(1000, decision.retryAfterMs) : finite(decision.retryAfterMs)
  const retryAfter = retryAfterMs === null ? null : Math.max(1, Math.ceil(retryAfterMs / 1000))
  const http = { ...headers }
  if (retryAfter !== null) http['Retry-After'] = String(retryAfter)
  const refusing = decision.policies.filter((p) => !p.allowed)
  const message = unavailable
    ? 'The rate limiter is unavailable; retry later.'
    : retryAfter === null
      ? 'Rate limited: this operation costs more than the budget can ever grant.'
      : `Rate limited: retry after ${retryAfter} s.`
  return new GraphQLError(message, {
    extensions: {
      code: unavailable ? 'SERVICE_UNAVAILABLE' : 'RATE_LIMITED',
      retryAfterMs,
      retryAfter,
      limit: decision.limit,
      remaining: decision.remaining,
      policies: refusing.map((p) => ({
        policy: p.policy,
        limit: p.limit,
        remaining: p.remaining,
        windowMs: p.windowMs,
        resetMs: p.resetMs,
        retryAfterMs: finite(p.retryAfterMs),
      })),
      http: { status: unavailable ? 503 : 429, headers: http },
    },
  })
}

const isCost = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0

/** Checks the options once (ConfigError) and returns the shared admit/settle steps. */
export function createGate(options: GraphQLRateLimitOptions): Gate {
  const costOptions = checkOptions(options)
  const { limiter, maxCost } = options
  const key = options.key ?? defaultKey
  const format = options.headers ?? 'ietf'
  return {
    async admit(schema, operation) {
      let estimate: number
      let priced: PricedOperation | undefined
      try {
        if (options.estimate) {
          estimate = await options.estimate(operation.document, operation.variables, operation)
          if (!isCost(estimate))
            throw new TypeError(`estimate must return a non-negative safe integer, returned ${estimate}`)
        } else {
          priced = bindOperation(schema, operation.document, operation.operationName, operation.variables)
          estimate = estimateCost(priced, costOptions)
        }
      } catch (error) {
        if (error instanceof GraphQLError) return error
        throw error
      }
      if (maxCost !== undefined && estimate > maxCost) {
        return costError(
          `The operation is estimated at ${estimate}, more than the ${maxCost} allowed.`,
          'COST_LIMIT_EXCEEDED',
          { cost: estimate, maxCost },
        )
      }
      const decision = await limiter.consume(await key(operation.context, operation), { cost: estimate })
      const headers = rateLimitHeaders(decision, { format, retryAfter: false })
      if (!decision.allowed) return refusalError(decision, headers)
      return { decision, operation, priced, headers }
    },
    async settle(admission, result) {
      if (admission.decision.source === 'fallback') return
      // the operation ran: a failed count or settle keeps the estimate, never loses the result
      try {
        let actual: number | undefined
        if (options.actualCost) actual = await options.actualCost(result, admission.operation)
        else if (admission.priced) actual = actualCost(admission.priced, costOptions, result.data)
        if (actual !== undefined) await limiter.settle(admission.decision, actual)
      } catch {}
    },
  }
}
