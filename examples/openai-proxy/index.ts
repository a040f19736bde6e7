/**
 * An OpenAI-compatible proxy limited per API key by tokens, runnable:
 * `UPSTREAM=https://api.openai.com REDIS_URL=redis://127.0.0.1:6379 PORT=3000 node --import tsx index.ts`
 *
 * One limiter, two policies charged in one call: tokens per minute (gcra) and tokens per day. A
 * completion's cost is known only once the upstream answers, so admission charges an estimate
 * (`max_tokens` plus the prompt's length / 4) and the response settles it to the `usage` the upstream
 * reports (`limiter.settle` through the adapter's `settle` option): the difference is charged, or
 * given back. Streaming (SSE) asks the upstream for a final usage chunk
 * (`stream_options: { include_usage: true }`) and settles when the stream ends; a client that goes away
 * mid-stream is charged the estimate (no usage came).
 */
import { RateLimiter, RedisStore } from '@tollgate/core'
import { rateLimit } from '@tollgate/express'
import express, { type Request, type Response } from 'express'
import { createClient } from 'redis'

const PORT = Number(process.env.PORT ?? 3000)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = process.env.TOLLGATE_PREFIX ?? 'example-openai'
const UPSTREAM = process.env.UPSTREAM ?? 'http://127.0.0.1:8080'
const TPM = Number(process.env.TOKENS_PER_MINUTE ?? 10_000)
const TPD = Number(process.env.TOKENS_PER_DAY ?? 1_000_000)

const redis = createClient({ url: REDIS_URL }).on('error', (e) => console.warn(e.message))
redis.connect().catch(() => {})
const tokens = new RateLimiter({
  store: new RedisStore(redis),
  prefix: PREFIX,
  policies: {
    minute: { limit: TPM, window: '1m', algorithm: 'gcra' },
    day: { limit: TPD, window: '1d', algorithm: 'fixed-window' },
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
    limiter: tokens,
    key: (req) => `key:${req.get('authorization') ?? 'anonymous'}`,
    cost: estimate,
    // the usage the upstream reported (set below); none (an error, a client gone): the estimate stays
    settle: (_req, res: Response) => res.locals.usage?.total_tokens,
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
