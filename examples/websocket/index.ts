/**
 * A chat server on `ws`: every user may hold 3 connections at once and send 10 messages per 10 s on each
 * connection, 100 a minute in all. `REDIS_URL` (default redis://127.0.0.1:6379) holds the counts, so the
 * limits hold across every process serving the chat. The user is the `user` query parameter here; take
 * it from your authentication instead.
 */
import { createServer, type IncomingMessage } from 'node:http'
import { RateLimiter, RedisStore } from '@tollgate/core'
import { limitWebSocket } from '@tollgate/websocket'
import { createClient } from 'redis'
import { WebSocketServer } from 'ws'

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }).on('error', (err) =>
  console.error('redis:', err.message),
)
redis.connect().catch(() => {}) // boot without Redis: the failure policy answers meanwhile
const store = new RedisStore(redis)
const prefix = process.env.TOLLGATE_PREFIX ?? 'chat'

const limit = limitWebSocket({
  connections: new RateLimiter({
    store,
    prefix: `${prefix}:connections`,
    policies: { open: { concurrency: 3, lease: '1m' } }, // renewed while open; a crashed server's end after 1 min
  }),
  messages: new RateLimiter({
    store,
    prefix: `${prefix}:messages`,
    policies: {
      connection: { limit: 10, window: '10s', algorithm: 'sliding-log' },
      user: { limit: 100, window: '1m', algorithm: 'sliding-window' },
    },
  }),
  perConnection: ['connection'],
  key: (req: IncomingMessage) => new URL(req.url ?? '/', 'http://x').searchParams.get('user') ?? 'anonymous',
})

const server = createServer()
const wss = new WebSocketServer({ server, verifyClient: limit.verifyClient })
wss.on('connection', async (socket, req) => {
  socket.on('message', (data) => {
    // only admitted messages reach listeners; refused ones were answered {"type":"rate_limited",…}
    for (const peer of wss.clients) peer.send(String(data))
  })
  await limit.attach(socket, req)
})

const port = Number(process.env.PORT ?? 3000)
server.listen(port, () => console.log(`chat listening on ws://127.0.0.1:${port}/?user=ann`))
process.on('SIGTERM', () => {
  wss.close()
  server.close()
  void redis.quit().finally(() => process.exit(0))
})
