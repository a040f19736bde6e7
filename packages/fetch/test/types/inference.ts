/** Type-level checks (compiled by `pnpm typecheck`, never run): handler and ip arguments infer together. */
import type { RateLimiter } from '@tollgate/core'
import { withRateLimit } from '../../src'

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
