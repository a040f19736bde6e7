/** Type-level checks (compiled by `pnpm typecheck`, never run): handler and ip arguments infer together. */
import type { RateLimiter } from '@tollgate/core'
import { limitedFetch, withRateLimit } from '../../src'

declare const limiter: RateLimiter
type Server = { requestIP(req: Request): { address: string } | null }
type Ctx = { waitUntil(p: Promise<unknown>): void }

// Bun: the handler ignores the server, ip reads it.
const bun = withRateLimit(() => new Response('ok'), {
  limiter,
  ip: (req, server: Server) => server.requestIP(req)?.address,
})
bun(new Request('http://x'), { requestIP: () => null })
// Workers: the handler takes env and ctx, ip only the request.
const worker = withRateLimit((_req: Request, _env: unknown, ctx: Ctx) => new Response(typeof ctx), {
  limiter,
  ip: (req) => req.headers.get('cf-connecting-ip') ?? undefined,
})
worker(new Request('http://x'), {}, { waitUntil() {} })
// Keyed without an address.
withRateLimit(async () => new Response('ok'), { limiter, key: () => 'all' })

// limitedFetch: takes the global fetch and gives a function usable wherever fetch is expected.
const outbound = limitedFetch({ limiter, fetch: globalThis.fetch, cost: () => ({ tokens: 10 }) })
const asFetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response> = outbound
void asFetch
void outbound.flush()
limitedFetch({ limiter, tokensOf: async (res) => ((await res.json()) as { n: number }).n, wait: false })
// @ts-expect-error wait is false or { maxWaitMs }
limitedFetch({ limiter, wait: 1000 })
