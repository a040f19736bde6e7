/**
 * A one-shot RESP2 client over a raw `node:net` socket.
 *
 * Why not a client library: the readiness checks in this kit must work before (and independently of)
 * whichever client the code under test uses, and must never be confused by a client's reconnect or
 * offline-queue behaviour. One socket, one command, one reply, then close.
 * @module
 */
import net from 'node:net'

/** A decoded RESP2 reply: simple/bulk strings, integers, nil, and (nested) arrays. */
export type RespReply = string | number | null | RespReply[]

/** An error reply (`-ERR …`) from Redis, kept apart from transport errors so callers can tell them apart. */
export class RespError extends Error {
  override name = 'RespError'
}

/** Options for {@link respCommand}. */
export interface RespCommandOptions {
  /** @default '127.0.0.1' */
  host?: string
  /** Give up (and destroy the socket) after this long. @default 2000 */
  timeoutMs?: number
}

/** Encodes one command as a RESP array of bulk strings, the form Redis accepts for every command. */
export function encodeCommand(args: readonly string[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)]
  for (const arg of args) {
    const bytes = Buffer.from(arg)
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'))
  }
  return Buffer.concat(parts)
}

type Parsed = { value: RespReply | RespError; next: number } | undefined

/** Parses one reply starting at `at`; `undefined` means "need more bytes". */
function parseReply(buf: Buffer, at: number): Parsed {
  const eol = buf.indexOf('\r\n', at)
  if (eol === -1) return undefined
  const type = String.fromCharCode(buf[at]!) // before `eol`: in the buffer
  const line = buf.toString('utf8', at + 1, eol)
  const after = eol + 2
  switch (type) {
    case '+':
      return { value: line, next: after }
    case '-':
      return { value: new RespError(line), next: after }
    case ':':
      return { value: Number(line), next: after }
    case '$': {
      const len = Number(line)
      if (len < 0) return { value: null, next: after }
      if (buf.length < after + len + 2) return undefined
      return { value: buf.toString('utf8', after, after + len), next: after + len + 2 }
    }
    case '*': {
      const count = Number(line)
      if (count < 0) return { value: null, next: after }
      const items: RespReply[] = []
      let next = after
      for (let i = 0; i < count; i++) {
        const item = parseReply(buf, next)
        if (item === undefined) return undefined
        if (item.value instanceof RespError) return item
        items.push(item.value)
        next = item.next
      }
      return { value: items, next }
    }
    default:
      return { value: new RespError(`unexpected RESP type byte ${JSON.stringify(type)}`), next: after }
  }
}

/**
 * Sends one command to a Redis server and resolves with its decoded reply.
 *
 * Rejects with {@link RespError} for an error reply (for example `LOADING` while a server starts), and with
 * the socket error (`ECONNREFUSED`, …) or a timeout error when the server cannot be reached.
 */
export function respCommand(
  port: number,
  args: readonly string[],
  opts: RespCommandOptions = {},
): Promise<RespReply> {
  const host = opts.host ?? '127.0.0.1'
  const timeoutMs = opts.timeoutMs ?? 2000
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0)
    let settled = false
    const socket = net.connect({ host, port })
    const finish = (err: Error | undefined, value?: RespReply) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      if (err) reject(err)
      else resolve(value ?? null)
    }
    const timer = setTimeout(
      () => finish(new Error(`no reply from ${host}:${port} to ${args[0]} within ${timeoutMs} ms`)),
      timeoutMs,
    )
    socket.on('connect', () => socket.write(encodeCommand(args)))
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk])
      const parsed = parseReply(buf, 0)
      if (parsed === undefined) return
      if (parsed.value instanceof RespError) finish(parsed.value)
      else finish(undefined, parsed.value)
    })
    socket.on('error', (err) => finish(err))
    socket.on('close', () => finish(new Error(`connection to ${host}:${port} closed before a reply`)))
  })
}
