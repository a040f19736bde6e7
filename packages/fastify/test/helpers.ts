/** Shared test setup: a node-redis client on the suite's redis-server, fresh key prefixes, HTTP requests. */
import http from 'node:http'
import { RateLimiter, type RateLimiterOptions, RedisStore } from '@tollgate/core'
import tollgate, { type TollgateOptions } from '@tollgate/fastify'
import { redisUrl } from '@tollgate/testkit'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import fastify4 from 'fastify4'
import { createClient } from 'redis'
import type { FastifyConstructor } from './factory'

export type Redis = Awaited<ReturnType<typeof connect>>

export async function connect() {
  const client = createClient({ url: redisUrl() })
  client.on('error', () => undefined)
  await client.connect()
  return client
}

let counter = 0
/** A key prefix no other test (or run) uses. */
export function freshPrefix(label = 'fastify'): string {
  return `${label}-${process.pid}-${Date.now().toString(36)}-${++counter}`
}

/** A limiter on `redis` with a fresh prefix. */
export function limiterOn(redis: Redis, options: Omit<RateLimiterOptions, 'store' | 'prefix'>): RateLimiter {
  return new RateLimiter({ store: new RedisStore(redis), prefix: freshPrefix(), ...options })
}

/** A response as the tests read it (header names in lower case). */
export interface Response {
  statusCode: number
  headers: http.IncomingHttpHeaders
  body: string
  json(): any
}

const listening = new WeakMap<FastifyInstance, Promise<string>>()

/**
 * One request over real HTTP (a fresh connection each time), in the shape of `app.inject()`. The app
 * starts listening on a free loopback port on first use. Not `app.inject()` itself: light-my-request
 * requires the ESM-only `cookie` 2, which jest's module loader cannot `require()` before Node 24.9.
 */
export async function inject(
  app: FastifyInstance,
  init: string | { url: string; method?: string; headers?: Record<string, string>; payload?: unknown },
): Promise<Response> {
  const { url, method = 'GET', headers = {}, payload } = typeof init === 'string' ? { url: init } : init
  let base = listening.get(app)
  if (!base) {
    base = app.listen({ port: 0, host: '127.0.0.1' })
    listening.set(app, base)
  }
  const { port } = new URL(await base)
  const body = payload === undefined ? undefined : JSON.stringify(payload)
  const sent: Record<string, string> = { ...headers }
  if (body !== undefined) sent['content-type'] = 'application/json'
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: url, method, headers: sent, agent: false },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('error', reject)
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          resolve({
            statusCode: res.statusCode ?? 0,
            headers: res.headers,
            body: text,
            json: () => JSON.parse(text),
          })
        })
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

export const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

/** Both supported majors (peer range '4.x || 5.x'): the plugin's behaviour is checked on each. */
export const MAJORS: [string, FastifyConstructor][] = [
  ['fastify 5', Fastify as FastifyConstructor],
  ['fastify 4', fastify4 as unknown as FastifyConstructor],
]

export const rateLimitHeader = (res: Response) => res.headers.ratelimit as string | undefined

/**
 * A test file's Redis client and apps (closed after each test): registers the hooks, so call it at the
 * top of the file.
 */
export function fastifyTestbed() {
  let redis: Redis | undefined
  const apps: FastifyInstance[] = []
  beforeAll(async () => {
    redis = await connect()
  })
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()))
  })
  afterAll(async () => {
    await redis?.quit()
  })
  const client = (): Redis => {
    if (!redis) throw new Error('the testbed connects in beforeAll')
    return redis
  }
  return {
    apps,
    redis: client,
    limiter: (limit: number, window: number | `${number}s` = '60s') => limiterOn(client(), { limit, window }),
    /** A Fastify app of `make`'s major with the plugin registered (awaited, so routes declared next are limited). */
    appWith: async (
      make: FastifyConstructor,
      options: TollgateOptions,
      server: FastifyServerOptions = {},
    ): Promise<FastifyInstance> => {
      const app = make(server)
      apps.push(app)
      await app.register(tollgate, options)
      return app
    },
  }
}

/** The statuses of `n` requests, sent one after another. */
export async function statuses(
  app: FastifyInstance,
  n: number,
  url: string,
  init: Record<string, unknown> = {},
) {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await inject(app, { url, ...init })).statusCode)
  return out
}

declare module 'fastify' {
  interface FastifyRequest {
    testUser: string
  }
}
