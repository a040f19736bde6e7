/** The estimate and the actual cost on a small schema, without a server or Redis. */
import { buildSchema, GraphQLError, parse } from 'graphql'
import { actualCost, bindOperation, estimateCost } from './cost'
import { checkOptions } from './options'

const schema = buildSchema(`
  interface Node { id: ID! }
  type User implements Node { id: ID! name: String! friends(first: Int): [User!]! }
  type Post implements Node { id: ID! title: String! }
  union Result = User | Post
  type Query { me: User, search(limit: Int): [Result!]!, nodes: [Node!]! }
`)
const limiter = { consume: () => undefined, settle: () => undefined }
const defaults = checkOptions({ limiter })
const bind = (query: string, variables?: Record<string, unknown>) =>
  bindOperation(schema, parse(query), undefined, variables)
const estimate = (query: string, variables?: Record<string, unknown>, options = defaults) =>
  estimateCost(bind(query, variables), options)

describe('estimateCost', () => {
  it('1 per field, a list times its size argument, __typename free', () => {
    expect(estimate('{ me { __typename id name } }')).toBe(3)
    expect(estimate('{ me { friends(first: 10) { id name } } }')).toBe(1 + 1 + 10 * 2)
    expect(estimate('query ($n: Int) { me { friends(first: $n) { id } } }', { n: 4 })).toBe(1 + 1 + 4)
    expect(estimate('{ nodes { id } }')).toBe(2) // no size argument: listSize.default, 1
  })

  it('fragments and aliases: a response key is priced once, each alias on its own', () => {
    const q = `{ me { ...F id ... on User { name } } a: me { id } }
      fragment F on User { id name }`
    expect(estimate(q)).toBe(1 + 2 + 1 + 1)
    expect(estimate('{ search(limit: 5) { ... on User { id name } ... on Post { title } } }')).toBe(1 + 5 * 3)
  })

  it('honours @skip and @include', () => {
    expect(estimate('query ($s: Boolean!) { me { id name @skip(if: $s) } }', { s: true })).toBe(2)
    expect(estimate('{ me { id name @include(if: false) } }')).toBe(2)
  })

  it('fieldCost by record or function, listSize options, maxDepth', () => {
    const byRecord = checkOptions({ limiter, fieldCost: { 'Query.me': 5, 'User.name': 0 } })
    expect(estimate('{ me { id name } }', {}, byRecord)).toBe(6)
    const byFn = checkOptions({
      limiter,
      fieldCost: ({ type, args }: { type: string; args: Record<string, unknown> }) =>
        type === 'Query' && args.limit !== undefined ? 20 : undefined,
      listSize: { args: ['limit'], default: 50 },
    })
    expect(estimate('{ search(limit: 2) { ... on Post { id } } nodes { id } }', {}, byFn)).toBe(
      20 + 2 + 1 + 50,
    )
    const shallow = checkOptions({ limiter, maxDepth: 2 })
    expect(() => estimate('{ me { friends { id } } }', {}, shallow)).toThrow(/3 levels deep/)
  })

  it('refuses what it cannot price as a GraphQLError', () => {
    expect(() => estimate('{ me { friends(first: -1) { id } } }')).toThrow(GraphQLError)
    expect(() => estimate('query ($n: Int) { me { friends(first: $n) { id } } }', { n: 'x' })).toThrow(
      GraphQLError,
    )
  })
})

describe('actualCost', () => {
  it('counts the fields present, a list by the items returned, nothing below a null', () => {
    const op = bind('{ me { id friends(first: 10) { id name } } search(limit: 9) { ... on Post { title } } }')
    const data = {
      me: {
        id: '1',
        friends: [
          { id: '2', name: 'b' },
          { id: '3', name: 'c' },
        ],
      },
      search: [{ title: 't' }, {}],
    }
    expect(actualCost(op, defaults, data)).toBe(1 + 1 + 1 + 2 * 2 + 1 + 1)
    expect(actualCost(op, defaults, { me: null, search: [] })).toBe(2)
    expect(actualCost(op, defaults, undefined)).toBe(0)
  })
})

describe('checkOptions', () => {
  it.each([
    [{}, /limiter must be a RateLimiter/],
    [{ limiter, key: 'ip' }, /key must be a function/],
    [{ limiter, fieldCost: { search: 1 } }, /fieldCost must be keys of the form 'Type.field'/],
    [{ limiter, fieldCost: { 'Query.me': -1 } }, /fieldCost.Query.me must be a non-negative safe integer/],
    [{ limiter, listSize: { default: 1.5 } }, /listSize.default/],
    [{ limiter, maxCost: 0 }, /maxCost must be a positive safe integer/],
    [{ limiter, headers: 'x' }, /headers must be/],
  ])('%p is a ConfigError', (options, message) => {
    expect(() => checkOptions(options)).toThrow(message)
  })
})
