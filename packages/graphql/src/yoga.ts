/**
 * `tollgateYoga(options)`: an envelop plugin (GraphQL Yoga 5, or any envelop setup) that prices every
 * query and mutation before it executes, refuses it with a `RATE_LIMITED` error and HTTP 429, and
 * settles the actual cost once the result is known.
 * @module
 */

import type { Plugin } from '@envelop/core'
import type { ExecutionResult } from 'graphql'
import { createGate } from './gate'
import type { GraphQLRateLimitOptions } from './options'

const isAsyncIterable = (v: unknown): v is AsyncIterable<unknown> =>
  typeof v === 'object' && v !== null && Symbol.asyncIterator in v

/** Adds the HTTP head Yoga turns into the response's headers (and leaves out of the body). */
function withHeaders(result: ExecutionResult, headers: Record<string, string>): ExecutionResult {
  const extensions = (result.extensions ?? {}) as Record<string, unknown>
  const http = (extensions.http ?? {}) as { headers?: Record<string, string> }
  return {
    ...result,
    extensions: { ...extensions, http: { ...http, headers: { ...http.headers, ...headers } } },
  }
}

/**
 * The Yoga / envelop plugin. Throws ConfigError on a bad option. Streamed results (`@defer`,
 * `@stream`) keep their estimate; subscriptions are not limited.
 *
 * @example
 * const yoga = createYoga({
 *   schema,
 *   plugins: [tollgateYoga({ limiter, fieldCost: { 'Query.search': 5 }, maxCost: 1000, maxDepth: 8 })],
 * })
 */
export function tollgateYoga<TContext extends Record<string, any> = Record<string, any>>(
  options: GraphQLRateLimitOptions<TContext>,
): Plugin<TContext> {
  const gate = createGate(options)
  return {
    async onExecute({ args, setResultAndStopExecution }) {
      const admission = await gate.admit(args.schema, {
        context: args.contextValue,
        document: args.document,
        operationName: args.operationName,
        variables: (args.variableValues ?? {}) as Record<string, unknown>,
      })
      if (!('decision' in admission)) {
        setResultAndStopExecution({ errors: [admission] })
        return
      }
      return {
        async onExecuteDone({ result, setResult }) {
          if (isAsyncIterable(result)) return
          await gate.settle(admission, result)
          if (Object.keys(admission.headers).length > 0) setResult(withHeaders(result, admission.headers))
        },
      }
    },
  }
}
