/**
 * The package on Bun and Deno, each with its own server (`Bun.serve`, `Deno.serve`) and its own client
 * address (`server.requestIP(req)`, `info.remoteAddr`), against the suite's Redis. Both runtimes come from
 * `pnpm install:runtimes`, or `BUN_BIN` / `DENO_BIN`, or `PATH`. Outside CI a runtime that is not
 * installed is skipped, and says so; with `CI=true` it fails.
 */
import path from 'node:path'
import { describeOnRuntimes } from '@tollgate/testkit/runtime-server'

describeOnRuntimes(
  '@tollgate/fetch on $name',
  'fetch-runtime',
  path.join(__dirname, 'fixtures/runtime-server.ts'),
  (name) =>
    `withRateLimit and checkRateLimit on ${name}'s own client address: 3 x 200, then 429 with headers`,
  async (base) => {
    for (const route of ['/limited', '/checked']) {
      const statuses: number[] = []
      for (let i = 0; i < 3; i++) {
        // A forwarded header from the client changes nothing: the socket address decides.
        const res = await fetch(`${base}${route}`, { headers: { 'x-forwarded-for': `203.0.113.${i}` } })
        statuses.push(res.status)
        expect([route, res.headers.get('ratelimit')]).toEqual([
          route,
          expect.stringMatching(new RegExp(`^"default";r=${2 - i};t=\\d+;pk=:`)),
        ])
        expect(res.headers.get('ratelimit-policy')).toMatch(/^"default";q=3;w=86400;pk=:/)
        const body = await res.json()
        if (route === '/checked') expect(body.key).toBe('127.0.0.1')
      }
      const refused = await fetch(`${base}${route}`, { headers: { 'x-forwarded-for': '203.0.113.99' } })
      expect([route, ...statuses, refused.status]).toEqual([route, 200, 200, 200, 429])
      expect(refused.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['default'] })
    }
  },
)

/** Reads a streamed body until `n` bytes have arrived (or it ends); returns how many did. */
async function readBytes(reader: ReadableStreamDefaultReader<Uint8Array>, n: number): Promise<number> {
  let received = 0
  while (received < n) {
    const { done, value } = await reader.read()
    if (done) break
    received += value.length
  }
  return received
}

/** Polls `/remaining` until it differs from `from` (a settlement lands after the body: not a timing). */
async function remainingAfter(base: string, query: string, from: number): Promise<number> {
  for (let i = 0; i < 500; i++) {
    const left = Number(await (await fetch(`${base}/remaining?${query}`)).text())
    if (left !== from) return left
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`never settled: ${query}`)
}

describeOnRuntimes(
  '@tollgate/fetch streaming on $name',
  'fetch-stream',
  path.join(__dirname, 'fixtures/runtime-server.ts'),
  (name) => `on ${name}, a streamed body settles and ends its lease when it ends or the client goes away`,
  async (base) => {
    // read fully: 100 units produced, 100 charged (the estimate was 10)
    const full = await fetch(`${base}/stream?k=full`)
    expect(full.status).toBe(200)
    expect((await full.text()).length).toBe(100)
    expect(await remainingAfter(base, 'k=full', 990)).toBe(900)

    // the client goes away after 50: the 50 produced are charged
    const cut = new AbortController()
    const half = await fetch(`${base}/stream?k=half&pause=50`, { signal: cut.signal })
    expect(await readBytes(half.body!.getReader(), 50)).toBe(50)
    cut.abort()
    expect(await remainingAfter(base, 'k=half', 990)).toBe(950)

    // a concurrency lease is held while the body streams, released when it ends
    const first = await fetch(`${base}/leased?k=l&pause=50`)
    const reader = first.body!.getReader()
    expect(await readBytes(reader, 50)).toBe(50)
    const busy = await fetch(`${base}/leased?k=l`)
    expect(busy.status).toBe(429)
    await busy.body?.cancel()
    await (await fetch(`${base}/resume?k=l`)).text()
    expect(await readBytes(reader, 50)).toBe(50)
    expect(await remainingAfter(base, 'k=l&of=leased', 0)).toBe(1)

    // ... and released when the client goes away mid-stream
    const gone = new AbortController()
    const held = await fetch(`${base}/leased?k=g&pause=50`, { signal: gone.signal })
    expect(await readBytes(held.body!.getReader(), 50)).toBe(50)
    expect(Number(await (await fetch(`${base}/remaining?k=g&of=leased`)).text())).toBe(0)
    gone.abort()
    expect(await remainingAfter(base, 'k=g&of=leased', 0)).toBe(1)
  },
)
