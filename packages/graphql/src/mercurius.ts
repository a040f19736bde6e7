/**
 * `tollgateMercurius(app, options)`: hooks on Mercurius (Fastify) that price every query and mutation
 * before it executes, refuse it with a `RATE_LIMITED` error and HTTP 429, and settle the actual cost
 * once it is resolved.
 * @module
 */

import type { FastifyInstance } from 'fastify'
import { GraphQLError } from 'graphql'
import type { MercuriusContext } from 'mercurius'
import { type Admission, createGate } from './gate'
import type { GraphQLRateLimitOptions } from './options'

/** Mercurius reads a thrown error's status from its original error, and sends extensions as they are. */
function forMercurius(error: GraphQLError, reply: MercuriusContext['reply'] | undefined): GraphQLError {
  const { http, ...extensions } = error.extensions as {
    http?: { status: number; headers?: Record<string, string> }
  }
  if (http?.headers && reply) reply.headers(http.headers)
  const original = Object.assign(new Error(error.message), { statusCode: http?.status ?? 400 })
  return new GraphQLError(error.message, { nodes: error.nodes, originalError: original, extensions })
}

/**
 * Registers the hooks on `app.graphql` (call it once Mercurius is registered). Throws ConfigError on a
 * bad option. The default identity is the client IP Fastify resolved (`request.ip`, which follows its
 * `trustProxy`). Subscriptions are not limited.
 *
 * @example
 * await app.register(mercurius, { schema, resolvers })
 * tollgateMercurius(app, { limiter, fieldCost: { 'Query.search': 5 }, maxCost: 1000 })
 */
export function tollgateMercurius<TContext extends MercuriusContext = MercuriusContext>(
  app: FastifyInstance,
  options: GraphQLRateLimitOptions<TContext>,
): void {
  const gate = createGate(options)
  if (typeof app?.graphql?.addHook !== 'function')
    throw new TypeError('tollgateMercurius: register mercurius on the Fastify app first')
  const admitted = new WeakMap<object, Admission>()
  app.graphql.addHook('preExecution', async (schema, document, context, variables) => {
    const request = context.reply?.request as { body?: unknown; query?: unknown } | undefined
    const params = (request?.body ?? request?.query ?? {}) as { operationName?: string | null }
    const answer = await gate.admit(schema, {
      context: context as TContext,
      document,
      operationName: params.operationName,
      variables: (variables ?? {}) as Record<string, unknown>,
    })
    if (!('decision' in answer)) throw forMercurius(answer, context.reply)
    admitted.set(context, answer)
  })
  app.graphql.addHook('onResolution', async (execution, context) => {
    const admission = admitted.get(context)
    if (!admission) return
    admitted.delete(context)
    if (context.reply) context.reply.headers(admission.headers)
    await gate.settle(admission, execution)
  })
}
