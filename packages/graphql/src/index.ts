/**
 * `@tollgate/graphql`: rate limits for GraphQL servers by query cost (GraphQL Yoga and envelop, Apollo
 * Server, Mercurius): estimated and refused before execution, settled to what was resolved.
 * @module
 */
export { tollgateApollo } from './apollo'
export { tollgateMercurius } from './mercurius'
export type { FieldCostInfo, GraphQLOperation, GraphQLRateLimitOptions } from './options'
export { tollgateYoga } from './yoga'
