/**
 * A local HTTP server that limits its callers like an LLM provider: so many requests and so many tokens
 * per window, counted by itself (no Redis), reported on every response in OpenAI's
 * `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` fields, and refused past them with a 429 and
 * `Retry-After`. A completion uses `usage` tokens (or the request body's `metadata.usage`) and reports
 * them in its body's `usage`, as the providers do.
 * @module
 */
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface LlmUpstreamOptions {
  /** Requests admitted per window. */
  requests: number
  /** Tokens admitted per window. */
  tokens: number
  /** The window, counted from the server's start. @default 600_000 (no reset inside a test) */
  windowMs?: number
  /** Tokens one completion uses. @default 100 */
  usage?: number
}

export interface LlmUpstream {
  /** `http://127.0.0.1:PORT` */
  readonly url: string
  /** Completions answered 200. */
  readonly ok: number
  /** Calls answered 429. */
  readonly limited: number
  /** Tokens used in the current window. */
  readonly tokensUsed: number
  close(): Promise<void>
}

/** Starts the server on a free loopback port. */
export async function startLlmUpstream(options: LlmUpstreamOptions): Promise<LlmUpstream> {
  const { requests, tokens, windowMs = 600_000, usage: defaultUsage = 100 } = options
  const started = Date.now()
  let window = 0
  let used = { requests: 0, tokens: 0 }
  const stats = { ok: 0, limited: 0 }

  const server = http.createServer(async (req, res) => {
    let text = ''
    for await (const chunk of req) text += chunk
    const now = Date.now()
    const current = Math.floor((now - started) / windowMs)
    if (current !== window) {
      window = current
      used = { requests: 0, tokens: 0 }
    }
    const resetMs = started + (current + 1) * windowMs - now
    let usage = defaultUsage
    try {
      const n = Number(JSON.parse(text || '{}')?.metadata?.usage)
      if (Number.isSafeInteger(n) && n >= 0) usage = n
    } catch {}
    const refused = used.requests >= requests || used.tokens + usage > tokens
    if (!refused) {
      used.requests++
      used.tokens += usage
    }
    res.setHeader('x-ratelimit-limit-requests', String(requests))
    res.setHeader('x-ratelimit-remaining-requests', String(requests - used.requests))
    res.setHeader('x-ratelimit-reset-requests', duration(resetMs))
    res.setHeader('x-ratelimit-limit-tokens', String(tokens))
    res.setHeader('x-ratelimit-remaining-tokens', String(tokens - used.tokens))
    res.setHeader('x-ratelimit-reset-tokens', duration(resetMs))
    res.setHeader('content-type', 'application/json')
    if (refused) {
      stats.limited++
      res.statusCode = 429
      res.setHeader('retry-after', String(Math.ceil(resetMs / 1000)))
      res.end(JSON.stringify({ error: { type: 'rate_limit_exceeded', message: 'Rate limit reached' } }))
      return
    }
    stats.ok++
    const body = {
      choices: [{ message: { role: 'assistant', content: 'hi' } }],
      usage: {
        prompt_tokens: Math.floor(usage / 2),
        completion_tokens: usage - Math.floor(usage / 2),
        total_tokens: usage,
      },
    }
    res.end(JSON.stringify(body))
  })
  server.keepAliveTimeout = 1000
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    get ok() {
      return stats.ok
    },
    get limited() {
      return stats.limited
    },
    get tokensUsed() {
      return used.tokens
    },
    close: async () => {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

/** A reset as OpenAI writes it: `6m0s`, `1s`, `20ms`. */
function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`
  const seconds = Math.ceil(ms / 1000)
  return seconds >= 60 ? `${Math.floor(seconds / 60)}m${seconds % 60}s` : `${seconds}s`
}
