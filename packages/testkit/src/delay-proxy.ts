/**
 * A TCP proxy in front of a redis-server that delivers requests late, as a slow network does: while
 * held, what clients send is kept (in order) instead of forwarded, and {@link DelayProxy.release}
 * delivers it, also for a client that has closed its connection meanwhile (its bytes were already on
 * the wire; the server sees them, then the close). Replies can be held the same way
 * ({@link DelayProxy.holdReplies}): the server has acted, and the client hears of it late.
 * @module
 */
import net from 'node:net'
import { REDIS_HOST } from './redis-server'

export interface DelayProxy {
  readonly port: number
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string
  /** From now on, requests on every connection are kept instead of forwarded. */
  holdRequests(): void
  /** From now on, replies on every connection are kept instead of forwarded. */
  holdReplies(): void
  /** Delivers everything kept, in order, and forwards at once again; resolves once written. */
  release(): Promise<void>
  /** Closes the proxy and destroys every connection. */
  close(): Promise<void>
}

interface Link {
  upstream: net.Socket
  client: net.Socket
  kept: Buffer[]
  /** Replies kept while replies are held. */
  replies: Buffer[]
  /** The client has closed: end the upstream once its kept bytes are delivered. */
  ended: boolean
}

/** Starts a proxy on a free port of 127.0.0.1 that forwards to `targetPort` there. */
export async function startDelayProxy(targetPort: number): Promise<DelayProxy> {
  const links = new Set<Link>()
  let holding = false
  let holdingReplies = false
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ host: REDIS_HOST, port: targetPort, allowHalfOpen: true })
    const link: Link = { upstream, client, kept: [], replies: [], ended: false }
    links.add(link)
    upstream.on('data', (chunk: Buffer) => {
      if (holdingReplies || link.replies.length > 0) link.replies.push(chunk)
      else client.write(chunk)
    })
    client.on('data', (chunk: Buffer) => {
      if (holding || link.kept.length > 0) link.kept.push(chunk)
      else upstream.write(chunk)
    })
    const clientGone = () => {
      if (link.ended) return
      link.ended = true
      if (link.kept.length === 0) upstream.end()
    }
    client.on('end', clientGone)
    client.on('close', clientGone)
    client.on('error', clientGone)
    upstream.on('error', () => client.destroy())
    upstream.on('close', () => {
      client.destroy()
      links.delete(link)
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, REDIS_HOST, () => resolve())
  })
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    url: `redis://${REDIS_HOST}:${port}`,
    holdRequests() {
      holding = true
    },
    holdReplies() {
      holdingReplies = true
    },
    async release() {
      holding = false
      holdingReplies = false
      const writes: Promise<void>[] = []
      for (const link of links) {
        const replies = link.replies
        link.replies = []
        for (const chunk of replies) {
          if (!link.client.destroyed) {
            writes.push(new Promise<void>((resolve) => link.client.write(chunk, () => resolve())))
          }
        }
        const kept = link.kept
        link.kept = []
        for (const chunk of kept) {
          writes.push(new Promise<void>((resolve) => link.upstream.write(chunk, () => resolve())))
        }
        if (link.ended) link.upstream.end()
      }
      await Promise.all(writes)
    },
    async close() {
      for (const { client, upstream } of links) {
        client.destroy()
        upstream.destroy()
      }
      links.clear()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
