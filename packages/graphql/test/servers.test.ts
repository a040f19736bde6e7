/**
 * The plugins inside each real server against the suite's redis-server. Budgets are sliding logs an hour
 * long, so no window boundary falls inside a test.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import type { GraphQLRateLimitOptions } from '@tollgate/graphql'
import { at, defined, redisUrl } from '@tollgate/testkit'
import { createClient } from 'redis'
import { library, TEN_BOOKS, THREE_BOOKS } from './fixtures/library'
import {
  apollo,
  mercurius,
  type Served,
  type ServerFactory,
  type TestContext,
  yoga,
} from './fixtures/servers'

let redis: ReturnType<typeof createClient>
let store: RedisStore
let n = 0
const limiter = (limit: number) =>
  new RateLimiter({
    store,
    prefix: `gql-${process.pid}-${Date.now().toString(36)}-${++n}`,
    limit,
    window: '1h',
    algorithm: 'sliding-log',
  })

beforeAll(async () => {
  redis = createClient({ url: redisUrl() })
  redis.on('error', () => undefined)
  await redis.connect()
  store = new RedisStore(redis)
})
afterAll(async () => {
  await redis.quit()
})

const servers: Record<string, ServerFactory> = { yoga, apollo, mercurius }

describe.each(Object.entries(servers))('%s', (_name, serve) => {
  const open: Served[] = []
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()))
  })
  async function start(limit: number, extra: Partial<GraphQLRateLimitOptions<TestContext>> = {}) {
    const lib = library()
    const l = limiter(limit)
    const server = await serve(lib, { limiter: l, key: (ctx) => `user:${ctx.user}`, ...extra })
    open.push(server)
    return { lib, l, server }
  }

  it('admits with the RateLimit headers and settles to the cost really resolved', async () => {
    const { l, server } = await start(100)
    const res = await server.post(TEN_BOOKS)
    expect(res.status).toBe(200)
    expect(res.body.errors).toBeUndefined()
    expect(res.body.data?.books).toHaveLength(3)
    expect(res.headers['ratelimit-policy']).toMatch(/^"default";q=100;w=3600;pk=/)
    // the admission's numbers: 31 estimated
    expect(res.headers.ratelimit).toMatch(/^"default";r=69;t=\d+/)
    expect(res.headers['retry-after']).toBeUndefined()
    // settled: 1 + 3 books x 3 fields
    expect((await l.peek('user:alice')).remaining).toBe(90)
  })

  it('refuses before execution with the error shape, 429 and Retry-After', async () => {
    const { lib, l, server } = await start(40)
    expect((await server.post(THREE_BOOKS)).status).toBe(200) // 10 spent
    const res = await server.post(TEN_BOOKS) // 31 > 30 left
    expect(res.status).toBe(429)
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    expect(res.headers['ratelimit-policy']).toMatch(/^"default";q=40;w=3600;pk=/)
    expect(res.body.data ?? undefined).toBeUndefined()
    const error = at(defined(res.body.errors, 'errors'), 0)
    expect(error.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      limit: 40,
      remaining: 30,
      retryAfter: Number(res.headers['retry-after']),
      policies: [{ policy: 'default', limit: 40, remaining: 30, windowMs: 3_600_000 }],
    })
    expect(error.extensions?.retryAfterMs).toBeGreaterThan(0)
    expect(error.extensions?.http).toBeUndefined()
    expect(lib.calls.books).toBe(1) // the refused query's resolver never ran
    expect((await l.peek('user:alice')).remaining).toBe(30)
  })

  it('a burst of 25 concurrent queries costing 10 against 100: exactly 10 run', async () => {
    const { lib, l, server } = await start(100)
    const replies = await Promise.all(Array.from({ length: 25 }, () => server.post(THREE_BOOKS)))
    expect(replies.filter((r) => r.status === 200)).toHaveLength(10)
    expect(replies.filter((r) => r.status === 429)).toHaveLength(15)
    expect(lib.calls.books).toBe(10)
    expect((await l.peek('user:alice')).remaining).toBe(0)
  })

  it('bad variables and list sizes are request errors: nothing runs, nothing is spent', async () => {
    const { lib, l, server } = await start(100)
    const byVar = await server.post('query ($n: Int) { books(first: $n) { title } }', { n: 'many' })
    const negative = await server.post('{ books(first: -5) { title } }')
    for (const res of [byVar, negative]) {
      expect(res.status).toBe(400)
      expect(res.body.data ?? undefined).toBeUndefined()
      expect(defined(res.body.errors, 'errors').length).toBeGreaterThan(0)
    }
    expect(at(defined(negative.body.errors, 'errors'), 0).extensions?.code).toBe('BAD_USER_INPUT')
    expect(lib.calls.books).toBe(0)
    expect((await l.peek('user:alice')).remaining).toBe(100)
  })

  it('maxCost and maxDepth refuse before the limiter', async () => {
    const { lib, l, server } = await start(1000, { maxCost: 30 })
    const costly = await server.post(TEN_BOOKS)
    expect(costly.status).toBe(400)
    expect(at(defined(costly.body.errors, 'errors'), 0).extensions).toMatchObject({
      code: 'COST_LIMIT_EXCEEDED',
      cost: 31,
      maxCost: 30,
    })
    const shallow = await start(1000, { maxDepth: 2 })
    const deep = await shallow.server.post('{ books(first: 1) { author { name } } }')
    expect(deep.status).toBe(400)
    expect(at(defined(deep.body.errors, 'errors'), 0).extensions).toMatchObject({
      code: 'DEPTH_LIMIT_EXCEEDED',
      maxDepth: 2,
    })
    expect(lib.calls.books + shallow.lib.calls.books).toBe(0)
    expect((await l.peek('user:alice')).remaining).toBe(1000)
    expect((await shallow.l.peek('user:alice')).remaining).toBe(1000)
  })

  it('uses your estimate and actualCost in place of the field walk', async () => {
    const { l, server } = await start(100, {
      estimate: () => 50,
      actualCost: (result) => ((result.data?.books as unknown[] | undefined)?.length ?? 0) * 7,
    })
    const res = await server.post(TEN_BOOKS)
    expect(res.headers.ratelimit).toMatch(/^"default";r=50;/)
    expect((await l.peek('user:alice')).remaining).toBe(79)
  })

  it("the limiter's failure policy answers: 'deny' is a 503 that runs nothing, 'allow' runs without headers", async () => {
    const dead = createClient({ url: redisUrl() }).on('error', () => {})
    await dead.connect()
    await dead.quit()
    const down = (onStoreError: 'allow' | 'deny') =>
      new RateLimiter({
        store: new RedisStore(dead),
        prefix: 'gql-down',
        limit: 5,
        window: '1h',
        onStoreError,
      })
    const denying = await start(5, { limiter: down('deny') })
    const denied = await denying.server.post(THREE_BOOKS)
    expect(denied.status).toBe(503)
    expect(Number(denied.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    expect(at(defined(denied.body.errors, 'errors'), 0).extensions).toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
      policies: [],
    })
    expect(denying.lib.calls.books).toBe(0)
    const allowing = await start(5, { limiter: down('allow') })
    const allowed = await allowing.server.post(THREE_BOOKS)
    expect(allowed.status).toBe(200)
    expect(allowed.body.data?.books).toHaveLength(3)
    expect(allowed.headers.ratelimit).toBeUndefined()
  })
})

describe('the default key', () => {
  it("is the client IP: Mercurius reads Fastify's request.ip (Yoga on node http: examples/graphql)", async () => {
    const l = limiter(100)
    const viaFastify = await mercurius(library(), { limiter: l })
    try {
      expect((await viaFastify.post(THREE_BOOKS)).status).toBe(200)
    } finally {
      await viaFastify.close()
    }
    // light-my-request's remote address
    expect((await l.peek('127.0.0.1')).remaining).toBe(90)
  })
})
