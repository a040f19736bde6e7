/**
 * Small HTTP apps on Express, Fastify and Hono (@hono/node-server), each optionally limited app-wide by
 * Tollgate or by the framework's usual peer limiter on Redis, and per route by Tollgate. Used by the HTTP
 * benchmark's server processes (`http-server.mts`) and by `pnpm demo` (`scripts/demo-http-server.mts`).
 *
 * The frameworks and peer libraries are dependencies of the benchmarks package, not of the repository
 * root, so they are imported here (this file resolves them from `benchmarks/node_modules`), and lazily:
 * a process pays only for the framework it serves.
 * @module
 */
import type { RateLimiter, StoreErrorPolicy } from '@tollgate/core'

export type Framework = 'express' | 'fastify' | 'hono'
export const FRAMEWORKS: readonly Framework[] = ['express', 'fastify', 'hono']

/** Tollgate options the three adapters share (no framework types in them). */
export interface TollgateSpec {
  limiter: RateLimiter
  onStoreError?: StoreErrorPolicy
}

/** The framework's peer limiter on Redis, app-wide. */
export interface PeerSpec {
  redisUrl: string
  /** Key prefix in Redis. */
  prefix: string
  limit: number
  windowMs: number
}

export interface RouteSpec {
  method: 'GET' | 'POST'
  path: string
  /** Tollgate on this route only (keyed on the client IP + route template). */
  tollgate?: TollgateSpec
  /** The JSON the handler answers with. @default { hello: 'world' } */
  body?: unknown
}

export interface AppSpec {
  framework: Framework
  routes: RouteSpec[]
  /** Tollgate app-wide (keyed on the client IP). */
  tollgate?: TollgateSpec
  /** The peer limiter app-wide (keyed on the client IP). */
  peer?: PeerSpec
  /**
   * Key the app-wide limiter (Tollgate or the peer) on this request header instead of the client IP,
   * through each library's own key function (`key` / `keyGenerator`).
   */
  identityHeader?: string
}

export interface RunningApp {
  readonly port: number
  /** What the app-wide limiter is, for reports: e.g. `express-rate-limit 8 + rate-limit-redis 6`. */
  readonly limiterName: string
  close(): Promise<void>
}

const HELLO = { hello: 'world' }
/** An Express handler (the benchmarks package has no @types/express). */
type RequestHandler = (req: any, res: any, next: () => void) => unknown

/** Builds the app and listens on 127.0.0.1 (`port` 0: a free one). */
export async function startApp(spec: AppSpec, port = 0): Promise<RunningApp> {
  if (spec.tollgate && spec.peer) throw new Error('an app has Tollgate or the peer app-wide, not both')
  if (spec.framework === 'express') return startExpress(spec, port)
  if (spec.framework === 'fastify') return startFastify(spec, port)
  if (spec.framework === 'hono') return startHono(spec, port)
  throw new Error(`unknown framework ${String(spec.framework)}`)
}

function nameOf(spec: AppSpec, peer: string): string {
  return spec.tollgate ? 'Tollgate' : spec.peer ? peer : 'none'
}

// ---- node-redis for the peers -------------------------------------------------------------------

/**
 * A node-redis client for a peer store. `commandOptions: { timeout: 0 }`: node-redis 6 otherwise arms a
 * 5 s AbortSignal per command, a large share of the client's CPU (docs/benchmarks.md); Tollgate's
 * RedisStore turns it off for its own calls, so the peers get the same.
 */
async function nodeRedis(url: string) {
  const { createClient } = await import('redis')
  const client = createClient({ url, commandOptions: { timeout: 0 } })
  client.on('error', (e: Error) => console.error(`peer node-redis: ${e.message}`))
  await client.connect()
  return client
}

// ---- Express --------------------------------------------------------------------------------------

async function startExpress(spec: AppSpec, port: number): Promise<RunningApp> {
  // @ts-expect-error the benchmarks package has no @types/express
  const { default: express } = await import('express')
  const app = express()
  const closers: (() => Promise<unknown>)[] = []
  const header = spec.identityHeader
  if (spec.tollgate) {
    const { rateLimit } = await import('@tollgate/express')
    app.use(rateLimit(header ? { ...spec.tollgate, key: (req) => req.get(header) ?? '' } : spec.tollgate))
  } else if (spec.peer) {
    const { rateLimit } = await import('express-rate-limit')
    const { RedisStore } = await import('rate-limit-redis')
    const client = await nodeRedis(spec.peer.redisUrl)
    closers.push(() => client.quit())
    app.use(
      rateLimit({
        windowMs: spec.peer.windowMs,
        limit: spec.peer.limit,
        ...(header ? { keyGenerator: (req: any) => req.get(header) ?? '' } : {}),
        store: new RedisStore({
          prefix: spec.peer.prefix,
          sendCommand: (...args: string[]) => client.sendCommand(args),
        }),
      }),
    )
  }
  for (const route of spec.routes) {
    const body = route.body ?? HELLO
    const handlers: RequestHandler[] = []
    if (route.tollgate) {
      const { rateLimit } = await import('@tollgate/express')
      handlers.push(rateLimit(route.tollgate) as RequestHandler)
    }
    const handler: RequestHandler = (_req, res) => {
      res.json(body)
    }
    if (route.method === 'GET') app.get(route.path, ...handlers, handler)
    else app.post(route.path, ...handlers, handler)
  }
  const server = await new Promise<import('node:http').Server>((resolve, reject) => {
    const s = app.listen(port, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(s)))
  })
  return {
    port: (server.address() as import('node:net').AddressInfo).port,
    limiterName: nameOf(spec, 'express-rate-limit 8.7 + rate-limit-redis 6.0 (node-redis)'),
    async close() {
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
      for (const c of closers) await c().catch(() => {})
    },
  }
}

// ---- Fastify --------------------------------------------------------------------------------------

async function startFastify(spec: AppSpec, port: number): Promise<RunningApp> {
  const { default: Fastify } = await import('fastify')
  const app = Fastify()
  const closers: (() => Promise<unknown>)[] = []
  const { tollgate } = await import('@tollgate/fastify')
  const header = spec.identityHeader
  const fromHeader = (request: { headers: Record<string, unknown> }) => String(request.headers[header!] ?? '')
  if (spec.tollgate) {
    await app.register(tollgate, { ...spec.tollgate, ...(header ? { key: fromHeader } : {}) })
  } else if (spec.routes.some((r) => r.tollgate)) {
    await app.register(tollgate, { global: false })
  }
  if (spec.peer) {
    const { default: fastifyRateLimit } = await import('@fastify/rate-limit')
    const { Redis } = await import('ioredis')
    const redis = new Redis(spec.peer.redisUrl)
    redis.on('error', (e: Error) => console.error(`peer ioredis: ${e.message}`))
    closers.push(() => redis.quit())
    await app.register(fastifyRateLimit, {
      max: spec.peer.limit,
      timeWindow: spec.peer.windowMs,
      redis,
      nameSpace: spec.peer.prefix,
      ...(header ? { keyGenerator: fromHeader } : {}),
    })
  }
  for (const route of spec.routes) {
    const body = route.body ?? HELLO
    app.route({
      method: route.method,
      url: route.path,
      config: route.tollgate ? { rateLimit: { ...route.tollgate } } : {},
      handler: async () => body,
    })
  }
  await app.listen({ port, host: '127.0.0.1' })
  return {
    port: (app.server.address() as import('node:net').AddressInfo).port,
    limiterName: nameOf(spec, '@fastify/rate-limit 11.2 (ioredis)'),
    async close() {
      const closing = app.close()
      app.server.closeAllConnections()
      await closing
      for (const c of closers) await c().catch(() => {})
    },
  }
}

// ---- Hono -----------------------------------------------------------------------------------------

async function startHono(spec: AppSpec, port: number): Promise<RunningApp> {
  const { Hono } = await import('hono')
  const { serve } = await import('@hono/node-server')
  const { getConnInfo } = await import('@hono/node-server/conninfo')
  const app = new Hono()
  const closers: (() => Promise<unknown>)[] = []
  const header = spec.identityHeader
  if (spec.tollgate) {
    const { rateLimiter } = await import('@tollgate/hono')
    app.use(
      rateLimiter({
        ...spec.tollgate,
        getConnInfo,
        ...(header ? { key: (c: import('hono').Context) => c.req.header(header) ?? '' } : {}),
      }),
    )
  } else if (spec.peer) {
    const { rateLimiter, RedisStore } = await import('hono-rate-limiter')
    const client = await nodeRedis(spec.peer.redisUrl)
    closers.push(() => client.quit())
    // hono-rate-limiter's RedisStore calls an Upstash-shaped client: scriptLoad(source),
    // evalsha(sha, keys[], args[]) and del(key). node-redis spells them differently.
    const upstashShaped = {
      scriptLoad: (source: string) => client.scriptLoad(source),
      evalsha: (sha: string, keys: string[], args: string[]) =>
        client.evalSha(sha, { keys, arguments: args }),
      del: (key: string) => client.del(key),
    }
    app.use(
      rateLimiter({
        windowMs: spec.peer.windowMs,
        limit: spec.peer.limit,
        // The same identity as Tollgate's: the socket address, or the identity header.
        keyGenerator: header ? (c) => c.req.header(header) ?? '' : (c) => getConnInfo(c).remote.address ?? '',
        store: new RedisStore({ client: upstashShaped as never, prefix: spec.peer.prefix }),
      }),
    )
  }
  for (const route of spec.routes) {
    const body = route.body ?? HELLO
    const handler = (c: import('hono').Context) => c.json(body as object)
    if (route.tollgate) {
      const { rateLimiter } = await import('@tollgate/hono')
      const mw = rateLimiter({ ...route.tollgate, getConnInfo })
      if (route.method === 'GET') app.get(route.path, mw, handler)
      else app.post(route.path, mw, handler)
    } else if (route.method === 'GET') app.get(route.path, handler)
    else app.post(route.path, handler)
  }
  const server = await new Promise<import('node:http').Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, () =>
      resolve(s as import('node:http').Server),
    )
  })
  return {
    port: (server.address() as import('node:net').AddressInfo).port,
    limiterName: nameOf(spec, 'hono-rate-limiter 0.5 RedisStore (node-redis, Upstash-shaped)'),
    async close() {
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
      for (const c of closers) await c().catch(() => {})
    },
  }
}
