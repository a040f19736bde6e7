/**
 * The testkit's Upstash REST server itself, spoken to with plain `fetch` (no client library in between):
 * single commands in the body and in the path, `/pipeline` with a per-command error, the bearer token.
 * Real Redis behind it (the suite's redis-server).
 */
import { redisUrl, startUpstashServer, type UpstashServer } from '@tollgate/testkit'

let rest: UpstashServer
beforeAll(async () => {
  rest = await startUpstashServer({ redisPort: Number(new URL(redisUrl()).port) })
})
afterAll(async () => {
  await rest?.stop()
})

const key = (name: string) => `tollgate:testkit:upstash-server:${process.pid}:${Date.now()}:${name}`

async function call(
  path: string,
  init: { body?: unknown; token?: string | null; method?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: unknown }> {
  const token = init.token === undefined ? rest.token : init.token
  const res = await fetch(`${rest.url}${path}`, {
    method: init.method ?? 'POST',
    headers: {
      ...(token === null ? {} : { Authorization: `Bearer ${token}` }),
      ...init.headers,
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  })
  return { status: res.status, body: await res.json() }
}

describe('Upstash REST server (testkit)', () => {
  it('a single command as a JSON array posted to /: {result}, or 400 {error}', async () => {
    const k = key('body')
    expect(await call('/', { body: ['SET', k, 'v1'] })).toEqual({ status: 200, body: { result: 'OK' } })
    expect(await call('/', { body: ['GET', k] })).toEqual({ status: 200, body: { result: 'v1' } })
    expect(await call('/', { body: ['INCR', k] })).toEqual({
      status: 400,
      body: { error: 'ERR value is not an integer or out of range' },
    })
    // Upstash-Encoding: base64 encodes every string but "OK"; integers stay numbers.
    expect(await call('/', { body: ['GET', k], headers: { 'Upstash-Encoding': 'base64' } })).toEqual({
      status: 200,
      body: { result: Buffer.from('v1').toString('base64') },
    })
  })

  it('a command in the URL path, with the token as ?_token= (not passed to Redis) and other query arguments', async () => {
    const k = key('path')
    const t = `_token=${encodeURIComponent(rest.token)}`
    expect(await call(`/set/${encodeURIComponent(k)}/v2?${t}`, { method: 'GET', token: null })).toEqual({
      status: 200,
      body: { result: 'OK' },
    })
    expect(await call(`/get/${encodeURIComponent(k)}?${t}`, { method: 'GET', token: null })).toEqual({
      status: 200,
      body: { result: 'v2' },
    })
    // A query parameter other than the token is an argument: SET k v3 EX 100.
    expect(
      await call(`/set/${encodeURIComponent(k)}/v3?EX=100&${t}`, { method: 'GET', token: null }),
    ).toEqual({ status: 200, body: { result: 'OK' } })
    const ttl = (await call('/', { body: ['TTL', k] })).body as { result: number }
    expect(ttl.result).toBeGreaterThan(0)
    expect(ttl.result).toBeLessThanOrEqual(100)
    // The path form with a bearer header; a POST body is the last argument.
    expect(await call(`/set/${encodeURIComponent(k)}`, { body: 'v4' })).toEqual({
      status: 200,
      body: { result: 'OK' },
    })
    expect(await call('/', { body: ['GET', k] })).toEqual({ status: 200, body: { result: 'v4' } })
  })

  it('/pipeline: one {result} or {error} per command, in order; an error fails only its command', async () => {
    const k = key('pipeline')
    rest.resetCounters()
    const { status, body } = await call('/pipeline', {
      body: [
        ['SET', k, 'x'],
        ['LPUSH', k, 'y'], // WRONGTYPE: k holds a string
        ['GET', k],
        ['INCR', `${k}:n`],
      ],
    })
    expect(status).toBe(200)
    expect(body).toEqual([
      { result: 'OK' },
      { error: 'WRONGTYPE Operation against a key holding the wrong kind of value' },
      { result: 'x' },
      { result: 1 },
    ])
    expect(rest.requests).toBe(1)
    expect(rest.commands).toBe(4)
    expect(await call('/pipeline', { body: [] })).toMatchObject({ status: 400 })
  })

  it('a missing or wrong token is 401 {"error":"Unauthorized"}, and the command never runs', async () => {
    const k = key('auth')
    const unauthorized = { status: 401, body: { error: 'Unauthorized' } }
    expect(await call('/', { body: ['SET', k, 'v'], token: null })).toEqual(unauthorized)
    expect(await call('/', { body: ['SET', k, 'v'], token: 'wrong' })).toEqual(unauthorized)
    expect(await call('/pipeline', { body: [['SET', k, 'v']], token: 'wrong' })).toEqual(unauthorized)
    expect(
      await call(`/set/${encodeURIComponent(k)}/v?_token=wrong`, { method: 'GET', token: null }),
    ).toEqual(unauthorized)
    expect(
      await call('/', {
        body: ['SET', k, 'v'],
        token: null,
        headers: { Authorization: `Basic ${rest.token}` },
      }),
    ).toEqual(unauthorized)
    expect(await call('/', { body: ['EXISTS', k] })).toEqual({ status: 200, body: { result: 0 } })
  })
})
