import path from 'node:path'
import { type ExampleProcess, redisUrl, startExample } from '@tollgate/testkit'
import { WebSocket } from 'ws'

let app: ExampleProcess
beforeAll(async () => {
  app = await startExample(path.join(__dirname, 'index.ts'), { REDIS_URL: redisUrl() })
}, 60_000)
afterAll(() => app.stop())

const url = (user: string) => `${app.base.replace('http', 'ws')}/?user=${user}`

/** Opens a socket: the socket once open, or the HTTP status and body of a refused upgrade. */
function open(user: string): Promise<WebSocket | { status: number; body: string }> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url(user))
    socket.on('error', () => {})
    socket.once('open', () => resolve(socket))
    socket.once('unexpected-response', (_req, res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
  })
}

describe('example: a chat server on ws', () => {
  it('3 connections per user, the 4th refused with 429; 10 messages per connection, then reply frames', async () => {
    const user = `ann${Date.now()}`
    const sockets = await Promise.all([open(user), open(user), open(user), open(user)])
    const opened = sockets.filter((s): s is WebSocket => s instanceof WebSocket)
    expect(opened).toHaveLength(3)
    const refused = sockets.find((s) => !(s instanceof WebSocket)) as { status: number; body: string }
    expect(refused.status).toBe(429)
    expect(JSON.parse(refused.body)).toEqual({ type: 'rate_limited', retryAfterMs: expect.any(Number) })
    const [first] = opened
    if (!first) throw new Error('no socket')
    const received: string[] = []
    first.on('message', (d) => received.push(String(d)))
    for (let i = 0; i < 12; i++) first.send(`m${i}`)
    // 10 broadcasts come back, then 2 refusals, in order
    while (received.length < 12) await new Promise((r) => first.once('message', r))
    expect(received.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => `m${i}`))
    for (const r of received.slice(10)) expect(JSON.parse(r).type).toBe('rate_limited')
    expect(first.readyState).toBe(WebSocket.OPEN)
    for (const s of opened) s.close()
  }, 30_000)
})
