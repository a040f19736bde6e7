/**
 * Redis over HTTP: `@upstash/redis` (and `@vercel/kv`, which extends it) as a {@link RedisStore} client.
 *
 * Scripts go through the client's own transport (`redis.client.request`: its URL, token, base64
 * decoding, read-your-writes token and fetch), not through its command methods, for two reasons:
 * - every REST request carries an AbortSignal that fires at the limiter's deadline, so a call the
 *   limiter has already answered with its failure policy is not left running (see the caveat below);
 * - the script calls of one turn (made before its microtasks run out: a `Promise.all` of decisions, the
 *   policies of one request) leave as one request: a single command when there is one, one `/pipeline`
 *   when there are several (at most {@link MAX_PIPELINE} commands each).
 *
 * An aborted request can still have been applied: the abort stops waiting for the answer, it cannot
 * recall a request the server already read. Such a spend is counted, never admitted twice, and expires
 * with its window. Likewise the client's own `retry` (5 retries on a network error by default) can send
 * a request again whose first copy reached Redis before the connection broke: pass `retry: false` to
 * `new Redis(...)` if a lost response must never count twice.
 *
 * Nothing here uses a Node built-in: it runs wherever `fetch` does (Workers, Vercel Edge, Deno, Bun).
 * @module
 */

/** The transport of an `@upstash/redis` client: `redis.client` (the `Requester` interface). */
interface Requester {
  request(req: { path?: string[]; body?: unknown; signal?: AbortSignal }): Promise<unknown>
}

/** Upstash answers a pipeline with one `{ result }` or `{ error }` per command. */
interface RestEntry {
  result?: unknown
  error?: string
}

type Command = (string | number)[]

interface Pending {
  command: Command
  resolve(value: unknown): void
  reject(error: unknown): void
}

/** Upstash's own limit for an auto-pipeline; a bigger turn is split into several requests. */
const MAX_PIPELINE = 1000

/** The deadline used until a limiter announces its own (the limiter's default `timeoutMs`). */
const DEFAULT_ABORT_MS = 500

/**
 * Whether `client` is an `@upstash/redis` client (or a `@vercel/kv` one): its transport, `pipeline()` and
 * the lowercase `evalsha`. Works through the auto-pipelining proxy the client returns by default.
 */
export function isUpstashClient(client: unknown): boolean {
  const c = client as {
    client?: { request?: unknown }
    evalsha?: unknown
    pipeline?: unknown
    evalSha?: unknown
  } | null
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.client?.request === 'function' &&
    typeof c.evalsha === 'function' &&
    typeof c.pipeline === 'function' &&
    typeof c.evalSha !== 'function'
  )
}

/**
 * The script seam over Upstash's REST protocol: `evalsha` / `eval` calls made in one turn are sent as
 * one request. Errors keep the server's message (`NOSCRIPT …` per command, so RedisStore re-sends that
 * one with EVAL), without the client's `, command was: […]` suffix, which would copy the keys (client
 * identities) and the Lua source into every log line.
 */
export class RestScriptClient {
  /** How long a REST request may run before it is aborted: the longest deadline of the limiters using it. */
  abortAfterMs = 0
  private readonly transport: Requester
  private queue: Pending[] = []

  constructor(client: { client: Requester }) {
    this.transport = client.client
  }

  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown> {
    return this.enqueue(['evalsha', sha1, keys.length, ...keys, ...args])
  }

  eval(source: string, keys: string[], args: string[]): Promise<unknown> {
    return this.enqueue(['eval', source, keys.length, ...keys, ...args])
  }

  /** A limiter's deadline: requests are aborted once the longest one announced has passed. */
  useDeadline(timeoutMs: number): void {
    if (timeoutMs > this.abortAfterMs) this.abortAfterMs = timeoutMs
  }

  private enqueue(command: Command): Promise<unknown> {
    return new Promise((resolve, reject) => {
      // A microtask, not a timer: on Workers a request must never wait on I/O another request started
      // (the runtime cancels it as hung), and one turn's microtasks belong to one request.
      if (this.queue.length === 0) queueMicrotask(() => this.flush())
      this.queue.push({ command, resolve, reject })
    })
  }

  private flush(): void {
    const queue = this.queue
    this.queue = []
    for (let i = 0; i < queue.length; i += MAX_PIPELINE) {
      const batch = queue.slice(i, i + MAX_PIPELINE)
      if (batch.length === 1) void this.single(batch[0]!)
      else void this.pipeline(batch)
    }
  }

  private signal(): AbortSignal {
    return AbortSignal.timeout(this.abortAfterMs || DEFAULT_ABORT_MS)
  }

  private async single(p: Pending): Promise<void> {
    const signal = this.signal()
    try {
      const reply = (await this.transport.request({ body: p.command, signal })) as RestEntry
      if (signal.aborted) throw aborted()
      if (reply.error !== undefined) throw new Error(reply.error)
      p.resolve(reply.result)
    } catch (error) {
      p.reject(clean(error, signal))
    }
  }

  private async pipeline(batch: Pending[]): Promise<void> {
    const signal = this.signal()
    let replies: unknown
    try {
      replies = await this.transport.request({
        path: ['pipeline'],
        body: batch.map((p) => p.command),
        signal,
      })
      if (signal.aborted) throw aborted()
      if (!Array.isArray(replies) || replies.length !== batch.length) {
        throw new Error(`unexpected /pipeline answer: ${JSON.stringify(replies)?.slice(0, 200)}`)
      }
    } catch (error) {
      const e = clean(error, signal)
      for (const p of batch) p.reject(e)
      return
    }
    for (let i = 0; i < batch.length; i++) {
      const entry = replies[i] as RestEntry
      const call = batch[i]!
      if (entry?.error !== undefined) call.reject(new Error(entry.error))
      else call.resolve(entry?.result)
    }
  }
}

function aborted(): Error {
  return new Error('REST request aborted at the deadline')
}

/** The error without `, command was: [...]` (keys and Lua source); an abort says so. */
function clean(error: unknown, signal: AbortSignal): Error {
  if (signal.aborted) return aborted()
  const message = (error as { message?: unknown } | null)?.message
  if (typeof message !== 'string') return error as Error
  const cut = message.indexOf(', command was: ')
  if (cut === -1) return error as Error
  const out = new Error(message.slice(0, cut))
  out.name = (error as Error).name
  return out
}
