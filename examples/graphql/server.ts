/**
 * A product catalogue on GraphQL Yoga: every client (by IP) has 1,000 points a minute. A query is priced
 * before it runs (each field 1 point, `search` 10, a list times its `first`) and settled to what it
 * returned, so asking for 300 products when 20 exist costs 20's worth.
 */
import { RateLimiter, type RedisStore } from '@tollgate/core'
import { tollgateYoga } from '@tollgate/graphql'
import { createSchema, createYoga } from 'graphql-yoga'

const products = Array.from({ length: 20 }, (_, i) => ({
  id: String(i + 1),
  name: `Product ${i + 1}`,
  price: 100 + i,
}))

const schema = createSchema({
  typeDefs: /* GraphQL */ `
    type Product {
      id: ID!
      name: String!
      price: Int!
    }
    type Query {
      products(first: Int = 10): [Product!]!
      search(text: String!, first: Int = 10): [Product!]!
    }
  `,
  resolvers: {
    Query: {
      products: (_: unknown, { first }: { first: number }) => products.slice(0, first),
      search: (_: unknown, { text, first }: { text: string; first: number }) =>
        products.filter((p) => p.name.includes(text)).slice(0, first),
    },
  },
})

export function points(store: RedisStore, prefix = 'graphql'): RateLimiter {
  return new RateLimiter({ store, prefix, policies: { points: { limit: 1000, window: '1m' } } })
}

export function catalogue(limiter: RateLimiter) {
  return createYoga({
    schema,
    logging: false,
    plugins: [
      tollgateYoga({
        limiter, // keyed on the client IP of node's request by default
        fieldCost: { 'Query.search': 10 },
        maxCost: 5000, // refused before the limiter: a query no budget should pay for
        maxDepth: 5,
      }),
    ],
  })
}
