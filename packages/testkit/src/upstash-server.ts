/**
 * A server that speaks the Upstash REST protocol in front of a real redis-server, so `@upstash/redis`
 * (and `@vercel/kv`, `@upstash/ratelimit`) run against real Redis in tests and benchmarks: no Upstash
 * service is reachable from our machines, and a mock would only prove the mock.
 *
 * What it implements (the parts of https://upstash.com/docs/redis/features/restapi the clients use):
 * - `Authorization: Bearer <token>` (or `?_token=`), else 401 `{"error":"Unauthorized"}`;
 * - a single command as a JSON array posted to `/`, or in the path form `/set/foo/bar` (GET or POST);
 *   `{"result": …}`, or HTTP 400 `{"error": "<the Redis error>"}`;
 * - `/pipeline`: an array of command arrays, answered 200 with an array of `{result}` / `{error}`;
 * - `/multi-exec`: the same inside MULTI/EXEC, or `{"error"}` (400) when the transaction is discarded;
 * - `Upstash-Encoding: base64`: every string in a result base64-encoded except `"OK"`; integers and
 *   nulls as they are.
 *
 * - the `allow-key-locking` shebang flag Upstash accepts (`@upstash/ratelimit`'s scripts carry it) and
 *   Redis 7.0 refuses: scripts are stored without it, and EVALSHA of the original SHA is mapped.
 *
 * Commands go over one pipelined RESP connection per server (Redis runs them one at a time anyway).
 * Test knobs: {@link UpstashServer.fault} makes it answer like a broken gateway or a slow one; the
 * counters tell how many HTTP requests and Redis commands a client needed.
 * @module
 */
import { createHash } from 'node:crypto'
import http from 'node:http'
import net from 'node:net'
import { REDIS_HOST } from './redis-server'
import { encodeCommand } from './resp'

/** A fault the server injects into every request until cleared (`server.fault = undefined`). */
export type UpstashFault =
  /** Answer this status and body without touching Redis (a gateway error, a 401, an HTML error page). */
  | { status: number; body: string; contentType?: string }
  /**
   * Wait this long before forwarding. A request whose client went away meanwhile (an aborted fetch) is
   * dropped and counted in `dropped`: it never reaches Redis.
   */
  | { delayMs: number }
  /** Destroy the connection without an answer (a reset). */
  | { reset: true }

/** Options for {@link startUpstashServer}. */
export interface UpstashServerOptions {
  /** The redis-server behind it (on 127.0.0.1). */
  redisPort: number
  /** The bearer token clients must send. @default 'tollgate-test-token' */
  token?: string
}

/** A running REST server. */
export interface UpstashServer {
  /** `http://127.0.0.1:<port>`: the client's `url`. */
  readonly url: string
  /** The client's `token`. */
  readonly token: string
  readonly port: number
  /** HTTP requests answered (any path, any status). */
  readonly requests: number
  /** Redis commands forwarded (a pipeline of n counts n). */
  readonly commands: number
  /** Requests dropped because the client went away during a `delayMs` fault. */
  readonly dropped: number
  /** The fault to inject, or undefined for normal service. */
  fault: UpstashFault | undefined
  /** Zeroes the counters. */
  resetCounters(): void
  stop(): Promise<void>
}

type Reply = Buffer | number | null | RedisError | Reply[]

class RedisError {
  constructor(readonly message: string) {}
}

/** One pipelined RESP connection: replies come back in the order commands were written. */
class RespPipe {
  private readonly socket: net.Socket
  private readonly waiting: Array<(reply: Reply | Error) => void> = []
  private buf: Buffer = Buffer.alloc(0)
  private failed: Error | undefined

  constructor(port: number) {
    this.socket = net.connect({ host: REDIS_HOST, port })
    this.socket.setNoDelay(true)
    this.socket.on('data', (chunk) => this.onData(chunk))
    const fail = (err: Error) => {
      this.failed = err
      for (const w of this.waiting.splice(0)) w(err)
    }
    this.socket.on('error', fail)
    this.socket.on('close', () => fail(new Error('connection to redis-server closed')))
  }

  /** Sends commands in one write; resolves with their replies in order. */
  send(commands: readonly (readonly string[])[]): Promise<Reply[]> {
    if (this.failed) return Promise.reject(this.failed)
    const replies = commands.map(
      () =>
        new Promise<Reply>((resolve, reject) => {
          this.waiting.push((r) => (r instanceof Error ? reject(r) : resolve(r)))
        }),
    )
    this.socket.write(Buffer.concat(commands.map((c) => encodeCommand(c))))
    return Promise.all(replies)
  }

  close(): void {
    this.socket.destroy()
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk])
    let at = 0
    for (;;) {
      const parsed = parse(this.buf, at)
      if (parsed === undefined) break
      at = parsed.next
      this.waiting.shift()?.(parsed.value)
    }
    this.buf = this.buf.subarray(at)
  }
}

/** Parses one RESP2 reply at `at` (errors nested in arrays stay per item); undefined: need more bytes. */
function parse(buf: Buffer, at: number): { value: Reply; next: number } | undefined {
  const eol = buf.indexOf('\r\n', at)
  if (eol === -1) return undefined
  const line = buf.toString('utf8', at + 1, eol)
  const after = eol + 2
  switch (buf[at]) {
    case 0x2b: // +
      return { value: Buffer.from(line), next: after }
    case 0x2d: // -
      return { value: new RedisError(line), next: after }
    case 0x3a: // :
      return { value: Number(line), next: after }
    case 0x24: {
      // $
      const len = Number(line)
      if (len < 0) return { value: null, next: after }
      if (buf.length < after + len + 2) return undefined
      return { value: buf.subarray(after, after + len), next: after + len + 2 }
    }
    case 0x2a: {
      // *
      const count = Number(line)
      if (count < 0) return { value: null, next: after }
      const items: Reply[] = []
      let next = after
      for (let i = 0; i < count; i++) {
        const item = parse(buf, next)
        if (item === undefined) return undefined
        items.push(item.value)
        next = item.next
      }
      return { value: items, next }
    }
    default:
      throw new Error(`unexpected RESP type byte ${buf[at]}`)
  }
}

/** A reply as Upstash puts it in JSON: strings (base64 unless "OK" when asked), numbers, null, arrays. */
function toJson(reply: Reply, base64: boolean): unknown {
  if (reply === null || typeof reply === 'number') return reply
  if (Array.isArray(reply)) return reply.map((r) => (r instanceof RedisError ? r.message : toJson(r, base64)))
  if (reply instanceof RedisError) return reply.message
  const text = reply.toString('utf8')
  return base64 && text !== 'OK' ? reply.toString('base64') : text
}

function entry(reply: Reply, base64: boolean): { result: unknown } | { error: string } {
  return reply instanceof RedisError ? { error: reply.message } : { result: toJson(reply, base64) }
}

function isCommand(value: unknown): value is (string | number | boolean)[] {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')
  )
}

const asArgs = (command: (string | number | boolean)[]): string[] => command.map((v) => String(v))

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex')
/**
 * Rewrites scripts that carry `allow-key-locking` (accepted by Upstash, refused by Redis 7.0) without it,
 * remembering original SHA -> stored SHA so the client's EVALSHA of the original still finds it.
 */
function withoutKeyLocking(command: string[], shas: Map<string, string>): string[] {
  const [first = '', second = ''] = command
  const name = first.toLowerCase()
  if (name === 'evalsha' || name === 'evalsha_ro') {
    const mapped = shas.get(second.toLowerCase())
    return mapped ? [first, mapped, ...command.slice(2)] : command
  }
  const isEval = name === 'eval' || name === 'eval_ro'
  const isLoad = name === 'script' && command[1]?.toLowerCase() === 'load'
  const at = isEval ? 1 : isLoad ? 2 : -1
  const script = command[at]
  if (script === undefined || !script.startsWith('#!lua')) return command
  const eol = script.indexOf('\n')
  const shebang = eol === -1 ? script : script.slice(0, eol)
  if (!shebang.includes('allow-key-locking')) return command
  const tokens = shebang.split(' ').flatMap((t) => {
    if (!t.startsWith('flags=')) return [t]
    const flags = t
      .slice(6)
      .split(',')
      .filter((f) => f !== '' && f !== 'allow-key-locking')
    return flags.length > 0 ? [`flags=${flags.join(',')}`] : []
  })
  const source = tokens.join(' ') + (eol === -1 ? '' : script.slice(eol))
  shas.set(sha1(script), sha1(source))
  const out = [...command]
  out[at] = source
  return out
}

/**
 * Starts the REST server on a free port of 127.0.0.1 in this process.
 * @example
 * const redis = await startRedisServer()
 * const rest = await startUpstashServer({ redisPort: redis.port })
 * const client = new Redis({ url: rest.url, token: rest.token })   // @upstash/redis
 */
export async function startUpstashServer(options: UpstashServerOptions): Promise<UpstashServer> {
  const token = options.token ?? 'tollgate-test-token'
  const pipe = new RespPipe(options.redisPort)
  const counters = { requests: 0, commands: 0, dropped: 0 }
  const shas = new Map<string, string>()
  let fault: UpstashFault | undefined

  const server = http.createServer(async (req, res) => {
    counters.requests++
    const send = (status: number, body: unknown) => {
      const text = JSON.stringify(body)
      res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) })
      res.end(text)
    }
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const current = fault
    if (current && 'reset' in current) {
      req.socket.destroy()
      return
    }
    if (current && 'status' in current) {
      res.writeHead(current.status, { 'Content-Type': current.contentType ?? 'text/html' })
      res.end(current.body)
      return
    }
    const url = new URL(req.url ?? '/', 'http://localhost')
    const auth = req.headers.authorization
    const given = auth?.startsWith('Bearer ') ? auth.slice(7) : url.searchParams.get('_token')
    if (given !== token) return send(401, { error: 'Unauthorized' })
    if (req.method !== 'GET' && req.method !== 'POST' && req.method !== 'PUT' && req.method !== 'HEAD') {
      return send(405, { error: 'Method Not Allowed' })
    }
    if (current && 'delayMs' in current) {
      await new Promise((resolve) => setTimeout(resolve, current.delayMs))
      if (res.destroyed || req.socket.destroyed) {
        counters.dropped++
        return
      }
    }
    const base64 = String(req.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64'
    const segments = url.pathname.split('/').filter(Boolean).map(decodeURIComponent)
    let body: unknown
    try {
      body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined
    } catch {
      body = Buffer.concat(chunks).toString('utf8') // the path form's raw value
    }
    try {
      if (segments.length === 1 && (segments[0] === 'pipeline' || segments[0] === 'multi-exec')) {
        if (!Array.isArray(body) || body.length === 0 || !body.every(isCommand)) {
          return send(400, { error: 'ERR a non-empty array of commands is expected' })
        }
        const commands = body.map((c) => withoutKeyLocking(asArgs(c), shas))
        counters.commands += commands.length
        if (segments[0] === 'pipeline') {
          const replies = await pipe.send(commands)
          return send(
            200,
            replies.map((r) => entry(r, base64)),
          )
        }
        const replies = await pipe.send([['MULTI'], ...commands, ['EXEC']])
        const exec = replies[replies.length - 1]
        if (exec instanceof RedisError) return send(400, { error: exec.message })
        if (!Array.isArray(exec)) return send(400, { error: 'ERR transaction discarded' })
        return send(
          200,
          exec.map((r) => entry(r, base64)),
        )
      }
      let command: string[]
      if (segments.length === 0) {
        if (!isCommand(body)) return send(400, { error: 'ERR a command array is expected' })
        command = withoutKeyLocking(asArgs(body), shas)
      } else {
        // Query parameters are arguments too (`/set/k/v?EX=100`), except the token (key and value).
        const query = [...url.searchParams.entries()].filter(([name]) => name !== '_token')
        command = [...segments, ...query.flat()]
        if (typeof body === 'string' && body !== '') command.push(body)
        else if (body !== undefined) command.push(JSON.stringify(body))
      }
      counters.commands++
      const [reply] = await pipe.send([command])
      if (reply instanceof RedisError) return send(400, { error: reply.message })
      return send(200, { result: toJson(reply!, base64) }) // one reply per command sent
    } catch (error) {
      return send(500, { error: `ERR ${(error as Error).message}` })
    }
  })
  server.keepAliveTimeout = 60_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, REDIS_HOST, () => resolve())
  })
  const address = server.address() as net.AddressInfo
  const port = address.port
  return {
    url: `http://${REDIS_HOST}:${port}`,
    token,
    port,
    get requests() {
      return counters.requests
    },
    get commands() {
      return counters.commands
    },
    get dropped() {
      return counters.dropped
    },
    get fault() {
      return fault
    },
    set fault(value) {
      fault = value
    },
    resetCounters() {
      counters.requests = 0
      counters.commands = 0
      counters.dropped = 0
    },
    stop: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      pipe.close()
    },
  }
}
