/**
 * Starts the proxy as its own process against a fake OpenAI-compatible upstream (a small HTTP server in
 * this test) and the test Redis: one call per request charges requests 1 and tokens the estimate, the
 * usage the upstream reports settles the tokens (plain and streamed), and concurrent clients get
 * exactly the requests budget, and never more tokens than the budget beyond one overdraft per request
 * in flight. Day-long windows: no window boundary or refill falls inside the test.
 */
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { type ExampleProcess, startExample, untilStoreAnswers } from '@tollgate/testkit'

const USED = 700 // a completion of the fake upstream uses 700 tokens, unless metadata.usage says
const REQUESTS = 20
let upstream: http.Server
let app: ExampleProcess

beforeAll(async () => {
  upstream = http.createServer(async (req, res) => {
    let text = ''
    for await (const chunk of req) text += chunk
    const body = JSON.parse(text)
    const used = Number(body.metadata?.usage ?? USED)
    const usage = { prompt_tokens: 100, completion_tokens: used - 100, total_tokens: used }
    if (!body.stream) {
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ choices: [{ message: { content: 'hi' } }], usage }))
      return
    }
    res.setHeader('content-type', 'text/event-stream')
    res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'h' } }], usage: null })}\n\n`)
    res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'i' } }], usage: null })}\n\n`)
    const final = body.stream_options?.include_usage ? usage : null
    res.write(`data: ${JSON.stringify({ choices: [], usage: final })}\n\n`)
    res.end('data: [DONE]\n\n')
  })
  upstream.listen(0, '127.0.0.1')
  await once(upstream, 'listening')
  const port = (upstream.address() as AddressInfo).port
  app = await startExample(join(__dirname, 'index.ts'), {
    UPSTREAM: `http://127.0.0.1:${port}`,
    REQUESTS_PER_MINUTE: String(REQUESTS),
    TOKENS_PER_MINUTE: '10000',
    WINDOW: '1d',
  })
  // its Redis client connects after it listens: wait for the store, on a key of its own
  await untilStoreAnswers(`${app.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer warm-up' },
    body: JSON.stringify({ model: 'm', messages: [], max_tokens: 1, stream: false }),
  })
}, 40_000)

afterAll(async () => {
  await app?.stop()
  upstream?.close()
})

const complete = (key: string, extra: Record<string, unknown> = {}) =>
  fetch(`${app.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({
      model: 'm',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 2000,
      ...extra,
    }),
  })

const left = (res: Response, policy: 'requests' | 'tokens') =>
  Number(new RegExp(`"${policy}";r=(\\d+)`).exec(res.headers.get('ratelimit') ?? '')![1])
const minuteLeft = (res: Response) => left(res, 'tokens')

/** Sends requests until the settlement of the ones before shows in the headers (it lands after the response). */
async function leftAfterSettling(key: string, expected: number): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const probe = await fetch(`${app.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'm', messages: [], max_tokens: 1, stream: false }),
    })
    await probe.arrayBuffer()
    const left = minuteLeft(probe)
    if (left <= expected) return left
  }
  return -1
}

it('charges the estimate at admission and settles to the reported usage', async () => {
  const first = await complete('a')
  expect(first.status).toBe(200)
  await first.json()
  const estimate = 10_000 - minuteLeft(first)
  expect(estimate).toBeGreaterThan(USED) // max_tokens 2000 + the prompt
  // the first completion now counts 700; each probe spends 1 + its prompt estimate and settles to 700 too
  const left = await leftAfterSettling('a', 10_000 - USED)
  expect(left).toBeGreaterThan(10_000 - 3 * USED)
  expect(left).toBeLessThanOrEqual(10_000 - USED)
})

it('a streamed completion settles from the final usage chunk', async () => {
  const res = await complete('b', { stream: true })
  expect(res.status).toBe(200)
  const text = await res.text()
  expect(text).toContain('[DONE]')
  expect(text).toContain(`"total_tokens":${USED}`)
  const left = await leftAfterSettling('b', 10_000 - USED)
  expect(left).toBeGreaterThan(10_000 - 3 * USED)
  expect(left).toBeLessThanOrEqual(10_000 - USED)
})

it('concurrent clients: the requests policy admits exactly its budget, each charged 1', async () => {
  const key = 'r'
  let admitted = 0
  // 8 clients in parallel, 4 completions each (half streamed) of 100 tokens: requests binds
  await Promise.all(
    Array.from({ length: 8 }, async (_, c) => {
      for (let i = 0; i < 4; i++) {
        const res = await complete(key, { max_tokens: 100, stream: c % 2 === 0, metadata: { usage: '100' } })
        await res.arrayBuffer()
        if (res.status === 200) admitted++
        else expect(res.status).toBe(429)
      }
    }),
  )
  expect(admitted).toBe(REQUESTS)
  // refused probes charge nothing; they show the settlements once all have landed (after the responses)
  let after: Response | undefined
  for (let i = 0; i < 50; i++) {
    after = await complete(key, { max_tokens: 1 })
    await after.arrayBuffer()
    expect(after.status).toBe(429)
    expect(left(after, 'requests')).toBe(0)
    if (left(after, 'tokens') === 10_000 - REQUESTS * 100) break
  }
  // tokens was charged each completion's usage, 100, not a request count
  expect(left(after!, 'tokens')).toBe(10_000 - REQUESTS * 100)
})

it('concurrent clients: the tokens admitted never exceed the budget beyond one overdraft per request in flight', async () => {
  const key = 'c'
  let admitted = 0
  let refused = 0
  // 8 clients in parallel, 4 completions each (half streamed): 32 x 700 = 22,400 tokens asked of 10,000
  await Promise.all(
    Array.from({ length: 8 }, async (_, c) => {
      for (let i = 0; i < 4; i++) {
        const res = await complete(key, { max_tokens: 600, stream: c % 2 === 0 })
        await res.arrayBuffer()
        if (res.status === 200) admitted++
        else if (res.status === 429) refused++
      }
    }),
  )
  expect(admitted + refused).toBe(32)
  expect(refused).toBeGreaterThan(0)
  // each admission needs its estimate (~615) free; each settlement adds 700 - estimate: at most the
  // budget plus one overdraft per in-flight request (8 clients)
  expect(admitted * USED).toBeLessThanOrEqual(10_000 + 8 * (USED - 600))
  // and requests was charged once per admitted completion, no more: a probe with max_tokens 1 shows it
  // (admitted probes settle to 0 tokens; the first refusal, by either policy, charged nothing)
  let probe: Response | undefined
  for (let i = 0; i < REQUESTS; i++) {
    probe = await complete(key, { max_tokens: 1, metadata: { usage: '0' } })
    await probe.arrayBuffer()
    if (probe.status !== 200) break
    admitted++
  }
  expect(probe!.status).toBe(429)
  expect(left(probe!, 'requests')).toBe(REQUESTS - admitted)
})
