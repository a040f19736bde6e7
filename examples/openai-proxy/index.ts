/**
 * An OpenAI-compatible proxy limited per API key by requests per minute and tokens per minute, runnable:
 * `UPSTREAM=https://api.openai.com REDIS_URL=redis://127.0.0.1:6379 PORT=3000 node --import tsx index.ts`
 *
 * One limiter, two policies, one call per request: `requests` is charged 1 and `tokens` the
 * completion's estimate (`max_tokens` plus the prompt's length / 4), atomically: a request is admitted
 * only if both fit. The true cost is known only once the upstream answers, so the response settles the
 * tokens policy to the `usage` the upstream reports (`{ tokens: usage.total_tokens }` through the
 * adapter's `settle` option; requests keeps its 1): the difference is charged, or given back.
 * Streaming (SSE) asks the upstream for a final usage chunk (`stream_options: { include_usage: true }`)
 * and settles when the stream ends; a client that goes away mid-stream keeps the estimate charged.
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import express, { type Request, type Response } from 'express'
import { createClient } from 'redis'

const PORT = Number(process.env.PORT ?? 3000)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = process.env.TOLLGATE_PREFIX ?? 'example-openai'
const UPSTREAM = process.env.UPSTREAM ?? 'http://127.0.0.1:8080'
const RPM = Number(process.env.REQUESTS_PER_MINUTE ?? 60)
const TPM = Number(process.env.TOKENS_PER_MINUTE ?? 10_000)
// both policies' window: a minute, as the names say (WINDOW=1d turns them into daily quotas)
const WINDOW = (process.env.WINDOW ?? '1m') as '1m'

const redis = createClient({ url: REDIS_URL }).on('error', (e) => console.warn(e.message))
redis.connect().catch(() => {})
const ai = new RateLimiter({
  store: new RedisStore(redis),
  prefix: PREFIX,
  policies: {
    requests: { limit: RPM, window: WINDOW, algorithm: 'sliding-window' },
    tokens: { limit: TPM, window: WINDOW, algorithm: 'gcra' },
  },
})

/** What admission charges: the most the completion may produce, plus a rough prompt size. */
function estimate(req: Request): number {
  const body = req.body ?? {}
  const prompt = JSON.stringify(body.messages ?? body.prompt ?? '').length
  const max = Number.isSafeInteger(body.max_tokens) && body.max_tokens > 0 ? body.max_tokens : 1024
  return Math.min(TPM, max + Math.ceil(prompt / 4))
}

const app = express()
app.use(express.json({ limit: '1mb' }))
app.post(
  '/v1/chat/completions',
  rateLimit({
    limiter: ai,
    // no API key: keyed on the client IP, never one budget shared by every anonymous client
    key: (req, { ip }) => (req.get('authorization') ? `key:${req.get('authorization')}` : `ip:${ip()}`),
    // requests 1 (not named), tokens the estimate: one call, both policies
    cost: (req) => ({ tokens: estimate(req) }),
    // the usage the upstream reported (set below); none (an error, a client gone): the estimate stays
    settle: (_req, res: Response) => ({ tokens: res.locals.usage?.total_tokens }),
  }),
  async (req, res) => {
    const stream = req.body?.stream === true
    const body = stream ? { ...req.body, stream_options: { include_usage: true } } : req.body
    const upstream = await fetch(`${UPSTREAM}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: req.get('authorization') ?? '' },
      body: JSON.stringify(body),
    })
    res.status(upstream.status)
    if (!stream || !upstream.body) {
      const json = await upstream.json()
      res.locals.usage = json.usage
      res.json(json)
      return
    }
    res.set({ 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    const decoder = new TextDecoder()
    let pending = ''
    for await (const chunk of upstream.body) {
      res.write(chunk)
      // SSE events: the last data event before [DONE] carries `usage`
      pending += decoder.decode(chunk, { stream: true })
      const lines = pending.split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue
        const usage = JSON.parse(line.slice(6)).usage
        if (usage) res.locals.usage = usage
      }
    }
    res.end()
  },
)

const server = app.listen(PORT, process.env.HOST ?? '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${PORT}`)
})
const stop = () => {
  server.close()
  server.closeAllConnections()
  redis.quit().finally(() => process.exit(0))
}
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
