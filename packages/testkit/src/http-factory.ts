/**
 * What every adapter's conformance factory shares (see http-suite.ts for the contract): the suite
 * options turned into the adapter's, handler invocations counted per route, a listening server as a
 * {@link RunningApp}, and Fastify's trusted hops. Each adapter's test/factory.ts keeps only the lines
 * of its framework's own idiom.
 * @module
 */
import type { Server } from 'node:http'
import { Readable } from 'node:stream'
import type { AppSpec, RunningApp, SuiteOptions, SuiteRequest, SuiteRoute, SuiteStream } from './http-suite'

/** The request functions the factory wraps; every other option reaches the adapter as it is. */
const REQUEST_FUNCTIONS = ['key', 'cost', 'skip', 'limits'] as const

/**
 * Suite options to adapter options: `key`, `cost`, `skip` and `limits` functions get the framework's
 * request through `view` (the `key` function's `info` passed through), `requestWasSuccessful` and a
 * `settle` function get it and the response's status (so they throw when the adapter passes no
 * response); `extra` (the adapter's own required options) is merged in first.
 */
export function adapterOptions<Req, Res>(
  options: SuiteOptions,
  view: (req: Req) => SuiteRequest | Promise<SuiteRequest>,
  statusOf: (res: Res) => number,
  extra?: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...options, ...extra }
  for (const name of REQUEST_FUNCTIONS) {
    const f = options[name] as ((r: SuiteRequest, info?: unknown) => unknown) | number | undefined
    if (typeof f === 'function')
      out[name] = (req: Req, info: unknown) => {
        const seen = view(req)
        return seen instanceof Promise ? seen.then((r) => f(r, info)) : f(seen, info)
      }
  }
  for (const name of ['requestWasSuccessful', 'settle'] as const) {
    const f = options[name] as ((r: SuiteRequest, outcome: { status: number }) => unknown) | object
    if (typeof f === 'function')
      out[name] = (req: Req, res: Res) => {
        const seen = view(req)
        const outcome = { status: statusOf(res) }
        return seen instanceof Promise ? seen.then((r) => f(r, outcome)) : f(seen, outcome)
      }
  }
  return out
}

/** A header's first value from Node's lower-cased header record. */
export function firstHeader(headers: Record<string, string | string[] | undefined>, name: string) {
  const value = headers[name.toLowerCase()]
  return Array.isArray(value) ? value[0] : value
}

/** Handler invocations per route template. */
export class RouteCalls {
  private readonly counts = new Map<string, number>()
  count(path: string): void {
    this.counts.set(path, (this.counts.get(path) ?? 0) + 1)
  }
  readonly calls = (path: string): number => this.counts.get(path) ?? 0
}

/**
 * The body every route's handler shares, before the framework answers: count the call, wait for the
 * route's `hold`, throw when the route `throws`.
 */
export async function runRoute(route: SuiteRoute, calls: RouteCalls): Promise<void> {
  calls.count(route.path)
  if (route.hold) await route.hold()
  if (route.throws) throw new Error('handler failed')
}

/**
 * A listening server as the suite's {@link RunningApp}. Without `close`, closing stops the server and
 * ends its keep-alive connections.
 */
export function loopbackApp(server: Server, calls: RouteCalls, close?: () => Promise<void>): RunningApp {
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    calls: calls.calls,
    close:
      close ??
      (() =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        })),
  }
}

/**
 * The suite's "n trusted hops" in Fastify's idiom. Fastify 5 does not honour a hop count (a number
 * trusts nothing: it cannot validate the immediate peer), so name the proxies: the suite's only peer is
 * 127.0.0.1, and the next n - 1 hops are whatever it forwarded.
 */
export function trustedProxies(
  hops: AppSpec['trustProxy'],
): false | ((address: string, hop: number) => boolean) {
  if (!hops) return false
  return (address, hop) => hop < hops && (hop > 0 || address === '127.0.0.1')
}

/** A route's streamed body as a Node `Readable` (Express, Fastify, Nest). */
export function nodeBody(stream: SuiteStream): Readable {
  return Readable.from(
    (async function* () {
      for (let unit = await stream.next(); unit !== null; unit = await stream.next()) yield unit
    })(),
    { objectMode: false, highWaterMark: 1 },
  )
}

/** A route's streamed body as a web `ReadableStream` (fetch handlers, Hono). */
export function webBody(stream: SuiteStream): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const unit = await stream.next()
      if (unit === null) controller.close()
      else controller.enqueue(encoder.encode(unit))
    },
  })
}
