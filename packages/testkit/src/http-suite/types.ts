/** The contract between the HTTP suite and an adapter's factory: what it asks for, what it gets back. */
import type http from 'node:http'
import type { RateLimiter } from '@tollgate/core'
import type { HttpLimiterOptions } from '@tollgate/http'

/** The framework-neutral view of a request that suite `key`/`cost`/`skip` functions receive. */
export interface SuiteRequest {
  /** A request header (lower- or mixed-case name), first value. */
  header(name: string): string | undefined
  /** The parsed JSON body (route-level limiters on POST routes), else `undefined`. */
  body: any
  /** The client IP as the framework resolved it (after its trust-proxy setting). */
  ip: string | undefined
}

/** The adapter options the suite passes through, with request functions over {@link SuiteRequest}. */
type SuiteFields =
  | 'key'
  | 'group'
  | 'limits'
  | 'cost'
  | 'skip'
  | 'headers'
  | 'legacyHeaders'
  | 'skipFailedRequests'
  | 'skipSuccessfulRequests'
  | 'requestWasSuccessful'
  | 'shadow'
  | 'ipv6Subnet'
  | 'onStoreError'
  | 'settle'

/**
 * Adapter options with request functions over {@link SuiteRequest} and responses as {@link SuiteOutcome}.
 * `key` gets the adapter's `KeyInfo` as its second argument (`info.ip()` is the canonical client IP).
 * The limiter is always pre-built: the factory wraps the request functions, nothing else.
 */
export type SuiteOptions = Pick<HttpLimiterOptions<SuiteRequest, SuiteOutcome>, SuiteFields> & {
  limiter: RateLimiter
}

/** A finished response, as `requestWasSuccessful` sees it through any adapter. */
export interface SuiteOutcome {
  status: number
}

/** One route of the app under test. */
export interface SuiteRoute {
  /**
   * `'ALL'`: the route answers every method the framework routes (Express `app.all`, Fastify `app.all`,
   * Hono `app.all`). A list: the one handler (and one route-level limiter) registered for each of these
   * methods (Express `app.<method>` per method, Fastify `method: [...]`, Hono `app.on([...])`). Such
   * routes get no body parser.
   */
  method: 'GET' | 'POST' | 'ALL' | readonly string[]
  /** Framework route template: one of '/hello', '/login', '/fail', '/users/:id', '/plan', '/slow'. */
  path: string
  /**
   * Route-level limiter options; omit for no route-level limiter; `false` = exempt from the app-wide
   * limiter too.
   */
  options?: SuiteOptions | false
  /** Status the handler answers. @default 200 */
  status?: number
  /** The handler (counted as called first) waits for this before it answers: a request in flight. */
  hold?: () => Promise<void>
  /** The handler throws instead of answering (the framework's error handling answers 500). */
  throws?: boolean
  /**
   * The handler answers 200 with this body, streamed in the framework's idiom (a Node `Readable` from
   * {@link nodeBody}, a web `ReadableStream` from {@link webBody}), produced as the client reads it.
   */
  stream?: SuiteStream
}

/**
 * A body of `units` one-byte units ('x'), produced one at a time as the client reads; it stops before
 * unit `pauseAt` until `resume()`, so what was produced when the client goes away is known exactly.
 */
export interface SuiteStream {
  readonly units: number
  /** Units produced so far: what a `settle` function charges. */
  readonly produced: number
  /** The next unit, or null once all are produced. */
  next(): Promise<string | null>
}

/** What the suite asks a factory to build. */
export interface AppSpec {
  /** App-wide limiter options (keyed on client IP by default), mounted before all routes. */
  app?: SuiteOptions
  routes: SuiteRoute[]
  /** `false` = socket address only (default); a number = trusted proxy hops (the framework's own setting). */
  trustProxy?: false | number
}

/** A listening app. */
export interface RunningApp {
  /** Base URL, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  url: string
  /** Stops listening and ends open connections. */
  close(): Promise<void>
  /** Handler invocations so far for the route with this template path. */
  calls(path: string): number
}

/** Builds and starts an app; rejects (leaving nothing open) when the adapter rejects its options. */
export type AppFactory = (spec: AppSpec) => Promise<RunningApp>

/** A response as the suite sees it. Header names are lower case. */
export interface SuiteResponse {
  status: number
  headers: http.IncomingHttpHeaders
  text: string
  json(): any
}
