/**
 * Sends a batch of chat completions through limitedFetch, runnable:
 * `UPSTREAM=https://api.openai.com OPENAI_API_KEY=sk-... REDIS_URL=redis://127.0.0.1:6379 node --import tsx index.ts`
 *
 * Start it on several machines at once: together they never send more than REQUESTS_PER_MINUTE requests
 * and TOKENS_PER_MINUTE tokens a minute, and they slow down to what the provider's headers say is left.
 */
import { RedisStore } from '@tollgate/core'
import { createClient } from 'redis'
import { chatClient } from './chat-client'

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const redis = createClient({ url: REDIS_URL }).on('error', (e) => console.warn(e.message))
await redis.connect()

const client = chatClient(new RedisStore(redis), {
  upstream: process.env.UPSTREAM ?? 'http://127.0.0.1:8080',
  apiKey: process.env.OPENAI_API_KEY ?? 'sk-local-test',
  prefix: process.env.TOLLGATE_PREFIX ?? 'example-outbound',
  requestsPerMinute: Number(process.env.REQUESTS_PER_MINUTE ?? 60),
  tokensPerMinute: Number(process.env.TOKENS_PER_MINUTE ?? 10_000),
  maxWaitMs: Number(process.env.MAX_WAIT_MS ?? 30_000),
})

const count = Number(process.env.CALLS ?? 10)
const results = await Promise.allSettled(
  Array.from({ length: count }, (_, i) => client.complete([{ role: 'user', content: `Say ${i}.` }], 64)),
)
const answered = results.filter((r) => r.status === 'fulfilled' && r.value.status === 200).length
const refusedUpstream = results.filter((r) => r.status === 'fulfilled' && r.value.status === 429).length
const waitedTooLong = results.filter((r) => r.status === 'rejected').length
await client.flush()
console.log(JSON.stringify({ answered, refusedUpstream, waitedTooLong }))
await redis.quit()
