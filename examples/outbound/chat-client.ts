/**
 * A chat-completions client whose calls every replica counts against one budget per API key: requests and
 * tokens per minute, as the provider limits them. Admission charges 1 request and an estimate of the
 * tokens; the `usage` the provider reports settles the tokens; the provider's x-ratelimit-* fields keep the
 * shared count in line with its own (another app on the same key, a lower tier than configured).
 */
import { RateLimiter, type RedisStore } from '@tollgate/core'
import { limitedFetch } from '@tollgate/fetch'

export interface ChatClientOptions {
  /** The provider's base URL, e.g. `https://api.openai.com`. */
  upstream: string
  apiKey: string
  /** The limiter's prefix: every replica of one app uses the same. */
  prefix: string
  requestsPerMinute: number
  tokensPerMinute: number
  /** How long a call may wait for the budget before it throws. */
  maxWaitMs?: number
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant'
  content: string
}

/** The most a completion may use: its `max_tokens` plus the prompt at about four characters a token. */
export function estimateTokens(messages: ChatMessage[], maxTokens: number): number {
  const prompt = messages.reduce((n, m) => n + m.content.length, 0)
  return maxTokens + Math.ceil(prompt / 4)
}

export function chatClient(store: RedisStore, options: ChatClientOptions) {
  const { upstream, apiKey, prefix, requestsPerMinute, tokensPerMinute, maxWaitMs = 30_000 } = options
  const limiter = new RateLimiter({
    store,
    prefix,
    policies: {
      requests: { limit: requestsPerMinute, window: '1m', algorithm: 'fixed-window' },
      tokens: { limit: tokensPerMinute, window: '1m', algorithm: 'fixed-window' },
    },
  })
  const estimates = new WeakMap<RequestInit, number>()
  const f = limitedFetch({
    limiter,
    // one budget per provider account, not per replica: the key names the account, never the secret
    key: () => `${new URL(upstream).origin}:${apiKey.slice(-6)}`,
    cost: (_input, init) => ({ tokens: estimates.get(init!) ?? 1 }), // requests: 1
    tokensOf: async (res) =>
      ((await res.json()) as { usage?: { total_tokens?: number } }).usage?.total_tokens,
    wait: { maxWaitMs },
  })

  async function complete(
    messages: ChatMessage[],
    maxTokens = 256,
  ): Promise<{ status: number; body: unknown }> {
    const init: RequestInit = {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages, max_tokens: maxTokens }),
    }
    estimates.set(init, Math.min(tokensPerMinute, estimateTokens(messages, maxTokens)))
    const res = await f(`${upstream}/v1/chat/completions`, init)
    return { status: res.status, body: await res.json() }
  }

  return { limiter, complete, flush: f.flush }
}
