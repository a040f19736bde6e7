/**
 * `tollgateApollo(options)`: an Apollo Server 5 plugin that prices every operation once it is resolved,
 * refuses it with a `RATE_LIMITED` error and HTTP 429 before execution, and settles the actual cost
 * before the response is sent.
 * @module
 */

import type { ApolloServerPlugin, BaseContext } from '@apollo/server'
import { type Admission, createGate } from './gate'
import type { GraphQLRateLimitOptions } from './options'

/**
 * The Apollo Server plugin. Throws ConfigError on a bad option. Apollo's context has no client address
 * unless your `context` function puts the request there as `req` (standalone and Express do not by
 * default): pass `key` to choose the identity. Incremental (`@defer`) results keep their estimate.
 *
 * @example
 * const server = new ApolloServer({
 *   typeDefs,
 *   resolvers,
 *   plugins: [tollgateApollo({ limiter, key: (ctx) => `user:${ctx.userId}`, maxCost: 1000 })],
 * })
 */
export function tollgateApollo<TContext extends BaseContext = BaseContext>(
  options: GraphQLRateLimitOptions<TContext>,
): ApolloServerPlugin<TContext> {
  const gate = createGate(options)
  return {
    async requestDidStart() {
      let admission: Admission | undefined
      return {
        async didResolveOperation(ctx) {
          const answer = await gate.admit(ctx.schema, {
            context: ctx.contextValue,
            document: ctx.document,
            operationName: ctx.operationName,
            variables: ctx.request.variables ?? {},
          })
          if (!('decision' in answer)) {
            // Apollo reads the HTTP head of a thrown error from a Map (lower-case names, as its HeaderMap);
            // a plain Map keeps @apollo/server a type-only import, so Yoga users need not install it
            const http = answer.extensions.http as { status: number; headers?: Record<string, string> }
            ;(answer.extensions as Record<string, unknown>).http = {
              status: http.status,
              headers: new Map(Object.entries(http.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
            }
            throw answer
          }
          admission = answer
        },
        async willSendResponse(ctx) {
          if (!admission) return
          for (const [name, value] of Object.entries(admission.headers))
            ctx.response.http.headers.set(name.toLowerCase(), value)
          const { body } = ctx.response
          if (body.kind === 'single') await gate.settle(admission, body.singleResult)
        },
      }
    },
  }
}
