/**
 * `@tollgate/hono` on the edge: the same app bundled for Cloudflare Workers and run in `workerd`, and for
 * Vercel Edge and run in `edge-runtime`, both on `@upstash/redis` against the testkit's Upstash REST server
 * (real Redis behind it). 200 simultaneous requests against limit 5 admit exactly 5 in each runtime, and
 * every response carries the same headers, byte for byte, as the same app on Node (only the clock-driven
 * numbers, seconds to the window's end, are masked). edge-runtime installs with the workspace; workerd
 * with `pnpm install:runtimes`.
 */

import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { serve } from '@hono/node-server'
import { getConnInfo as nodeConnInfo } from '@hono/node-server/conninfo'
import {
  at,
  bundleWorker,
  type EdgeRuntimeHandle,
  redisUrl,
  runtimeForTests,
  startEdgeRuntime,
  startUpstashServer,
  startWorkerd,
  type UpstashServer,
  type WorkerBundle,
  type WorkerdHandle,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { Redis } from '@upstash/redis'
import { createClient } from 'redis'
import { createEdgeApp } from './app'

const LIMIT = 5
const BURST = 200

/** Response headers a limiter sets (transport headers like Date, Connection differ per server). */
const LIMIT_HEADERS = [
  'content-type',
  'ratelimit',
  'ratelimit-policy',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
]

interface Outcome {
  status: number
  /** Headers and body as sent, with the seconds-to-reset numbers masked. */
  text: string
}

/** Masks what depends on the moment of the request (seconds until the day's window ends). */
const mask = (s: string) =>
  s.replace(/\bt=\d+/g, 't=#').replace(/^(retry-after|x-ratelimit-reset): \d+$/gm, '$1: #')

async function outcome(res: Response): Promise<Outcome> {
  const lines = LIMIT_HEADERS.filter((h) => res.headers.has(h)).map((h) => `${h}: ${res.headers.get(h)}`)
  const body = await res.text()
  return { status: res.status, text: mask(`${lines.join('\n')}\n\n${body}`) }
}

/** Fires `BURST` requests at once from one client address; the outcomes sorted, so runs compare. */
async function burst(url: string, headers: Record<string, string>): Promise<Outcome[]> {
  const all = await Promise.all(
    Array.from({ length: BURST }, () => fetch(`${url}/limited`, { headers }).then(outcome)),
  )
  return all.sort((a, b) => a.status - b.status || (a.text < b.text ? -1 : a.text > b.text ? 1 : 0))
}

const entry = (name: string) => path.join(__dirname, name)

describe('@tollgate/hono on edge runtimes, over @upstash/redis', () => {
  let rest: UpstashServer
  let admin: Awaited<ReturnType<typeof connect>>
  const prefix = uniquePrefix('edge')
  let reference: Outcome[]
  const connect = () =>
    createClient({ url: redisUrl() })
      .on('error', () => {})
      .connect()

  /** A fresh budget for the next runtime (same prefix and address, so the same key and `pk`). */
  const clearKeys = async () => {
    const keys = await admin.keys(`${prefix}:*`)
    if (keys.length > 0) await admin.del(keys)
  }

  beforeAll(async () => {
    rest = await startUpstashServer({ redisPort: Number(new URL(redisUrl()).port) })
    admin = await connect()
    // Node first: the reference every edge runtime must match.
    const app = createEdgeApp({
      redis: new Redis({ url: rest.url, token: rest.token }),
      getConnInfo: nodeConnInfo,
      prefix,
      runtime: 'node',
    })
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise((resolve) => server.once('listening', resolve))
    const { port } = server.address() as AddressInfo
    try {
      reference = await burst(`http://127.0.0.1:${port}`, {})
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
  afterAll(async () => {
    await admin?.quit()
    await rest?.stop()
  })

  it(`Node: ${BURST} simultaneous requests, limit ${LIMIT}: exactly ${LIMIT} admitted`, () => {
    expect(reference.filter((o) => o.status === 200)).toHaveLength(LIMIT)
    expect(reference.filter((o) => o.status === 429)).toHaveLength(BURST - LIMIT)
    expect(at(reference, 0).text).toContain('ratelimit: "default";r=')
  })

  const noNodeBuiltins = (bundle: WorkerBundle) => {
    expect(
      bundle.inputs.filter((i) => i.startsWith('node:') || /(^|\/)node_modules\/(ioredis|redis)\//.test(i)),
    ).toEqual([])
    expect(bundle.inputs.some((i) => i.includes('packages/core/src/limiter/limiter.ts'))).toBe(true)
  }

  // workerd comes from `pnpm install:runtimes` (a failure in CI when missing, a skip elsewhere).
  const withWorkerd = runtimeForTests('workerd') ? describe : describe.skip
  withWorkerd('Cloudflare Workers (workerd)', () => {
    let workerd: WorkerdHandle | undefined
    beforeAll(async () => {
      await clearKeys()
      const bundle = await bundleWorker(entry('workers-entry.ts'))
      noNodeBuiltins(bundle)
      workerd = await startWorkerd({
        code: bundle.code,
        bindings: {
          UPSTASH_REDIS_REST_URL: rest.url,
          UPSTASH_REDIS_REST_TOKEN: rest.token,
          TOLLGATE_PREFIX: prefix,
        },
      })
    })
    afterAll(async () => {
      await workerd?.stop()
    })

    it('runs inside workerd', async () => {
      expect(await (await fetch(`${workerd!.url}/runtime`)).text()).toBe('workerd')
    })

    it(`${BURST} simultaneous requests, limit ${LIMIT}: exactly ${LIMIT}, with Node's headers byte for byte`, async () => {
      const got = await burst(workerd!.url, { 'CF-Connecting-IP': '127.0.0.1' })
      expect(got.filter((o) => o.status === 200)).toHaveLength(LIMIT)
      expect(got).toEqual(reference)
    })

    it('keys on CF-Connecting-IP (X-Forwarded-For ignored); a request without it is a 400', async () => {
      const other = await fetch(`${workerd!.url}/limited`, { headers: { 'CF-Connecting-IP': '203.0.113.7' } })
      expect(other.status).toBe(200)
      expect(other.headers.get('ratelimit')).toMatch(/^"default";r=4;t=\d+;pk=:/)
      const spoofed = await fetch(`${workerd!.url}/limited`, {
        headers: { 'CF-Connecting-IP': '127.0.0.1', 'X-Forwarded-For': '198.51.100.1' },
      })
      expect(spoofed.status).toBe(429)
      expect((await fetch(`${workerd!.url}/limited`)).status).toBe(400)
    })
  })

  describe('Vercel Edge (edge-runtime)', () => {
    let edge: EdgeRuntimeHandle | undefined
    beforeAll(async () => {
      await clearKeys()
      const bundle = await bundleWorker(entry('vercel-entry.ts'), {
        format: 'iife',
        define: { TOLLGATE_EDGE_ENV: JSON.stringify({ url: rest.url, token: rest.token, prefix }) },
      })
      noNodeBuiltins(bundle)
      edge = await startEdgeRuntime(bundle.code)
    })
    afterAll(async () => {
      await edge?.stop()
    })

    it('runs inside edge-runtime', async () => {
      expect(await (await fetch(`${edge!.url}/runtime`)).text()).toBe('edge-runtime')
    })

    it(`${BURST} simultaneous requests, limit ${LIMIT}: exactly ${LIMIT}, with Node's headers byte for byte`, async () => {
      const got = await burst(edge!.url, { 'X-Real-IP': '127.0.0.1' })
      expect(got.filter((o) => o.status === 200)).toHaveLength(LIMIT)
      expect(got).toEqual(reference)
    })

    it('keys on X-Real-IP', async () => {
      const other = await fetch(`${edge!.url}/limited`, { headers: { 'X-Real-IP': '203.0.113.9' } })
      expect(other.status).toBe(200)
      expect((await fetch(`${edge!.url}/limited`, { headers: { 'X-Real-IP': '127.0.0.1' } })).status).toBe(
        429,
      )
    })
  })
})
