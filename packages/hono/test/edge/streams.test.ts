/**
 * Streamed bodies on Cloudflare Workers (workerd), through `@tollgate/fetch` and `@tollgate/hono` over
 * `@upstash/redis` (the testkit's Upstash REST server, real Redis behind it): the `settle` option reads
 * what the stream produced once the body has been read to its end, or when the client goes away; a
 * concurrency lease is held while the body streams. workerd comes from `pnpm install:runtimes`.
 */
import path from 'node:path'
import {
  bundleWorker,
  redisUrl,
  runtimeForTests,
  startUpstashServer,
  startWorkerd,
  type UpstashServer,
  type WorkerdHandle,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'

async function readBytes(reader: ReadableStreamDefaultReader<Uint8Array>, n: number): Promise<number> {
  let received = 0
  while (received < n) {
    const { done, value } = await reader.read()
    if (done) break
    received += value.length
  }
  return received
}

const withWorkerd = runtimeForTests('workerd') ? describe : describe.skip
withWorkerd('streamed bodies on Cloudflare Workers (workerd)', () => {
  let rest: UpstashServer | undefined
  let workerd: WorkerdHandle | undefined
  beforeAll(async () => {
    rest = await startUpstashServer({ redisPort: Number(new URL(redisUrl()).port) })
    const bundle = await bundleWorker(path.join(__dirname, 'stream-worker.ts'))
    workerd = await startWorkerd({
      code: bundle.code,
      bindings: {
        UPSTASH_REDIS_REST_URL: rest.url,
        UPSTASH_REDIS_REST_TOKEN: rest.token,
        TOLLGATE_PREFIX: uniquePrefix('edge-stream'),
      },
    })
  })
  afterAll(async () => {
    await workerd?.stop()
    await rest?.stop()
  })

  const remaining = async (query: string) =>
    Number(await (await fetch(`${workerd!.url}/remaining?${query}`)).text())
  /** Polls until the key's remaining differs from `from` (a settlement lands after the body). */
  const remainingAfter = async (query: string, from: number) => {
    for (let i = 0; i < 500; i++) {
      const left = await remaining(query)
      if (left !== from) return left
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    throw new Error(`never settled: ${query}\n${workerd!.output()}`)
  }

  it.each(['fetch', 'hono'])('%s: 100 units read fully are charged 100 (estimate 10)', async (via) => {
    const res = await fetch(`${workerd!.url}/${via}/stream?k=full-${via}`)
    expect(res.status).toBe(200)
    expect((await res.text()).length).toBe(100)
    expect(await remainingAfter(`k=full-${via}&of=${via}`, 990)).toBe(900)
  })

  // workerd sees a client gone only when it next writes to it: the stream goes on after the client has
  // left, and is cancelled at the first write that fails. It is charged what it had produced by then.
  it.each(['fetch', 'hono'])('%s: a client gone mid-stream is charged what was produced', async (via) => {
    const k = `half-${via}`
    const cut = new AbortController()
    const res = await fetch(`${workerd!.url}/${via}/stream?k=${k}&pause=50`, { signal: cut.signal })
    expect(await readBytes(res.body!.getReader(), 50)).toBe(50)
    cut.abort()
    await (await fetch(`${workerd!.url}/resume?k=${k}`)).text()
    const left = await remainingAfter(`k=${k}&of=${via}`, 990)
    const produced = Number(await (await fetch(`${workerd!.url}/produced?k=${k}`)).text())
    expect(produced).toBeGreaterThanOrEqual(50)
    expect(left).toBe(1000 - produced)
  })

  it('fetch: a concurrency lease is held while the body streams, released when it ends', async () => {
    const first = await fetch(`${workerd!.url}/fetch/leased?k=l&pause=50`)
    const reader = first.body!.getReader()
    expect(await readBytes(reader, 50)).toBe(50)
    const busy = await fetch(`${workerd!.url}/fetch/leased?k=l`)
    expect(busy.status).toBe(429)
    await busy.body?.cancel()
    await (await fetch(`${workerd!.url}/resume?k=l`)).text()
    expect(await readBytes(reader, 50)).toBe(50)
    expect(await remainingAfter('k=l&of=leased', 0)).toBe(1)
  })
})
