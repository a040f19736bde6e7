/**
 * A TCP proxy in front of a redis-server that delivers requests late, as a slow network does: while
 * held, what clients send is kept (in order) instead of forwarded, and {@link DelayProxy.release}
 * delivers it, also for a client that has closed its connection meanwhile (its bytes were already on
 * the wire; the server sees them, then the close). Replies are forwarded at once.
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
  /** Delivers every kept request, in order, and forwards at once again; resolves once written. */
  release(): Promise<void>
  /** Closes the proxy and destroys every connection. */
  close(): Promise<void>
}

interface Link {
  upstream: net.Socket
  client: net.Socket
  kept: Buffer[]
  /** The client has closed: end the upstream once its kept bytes are delivered. */
  ended: boolean
}

/** Starts a proxy on a free port of 127.0.0.1 that forwards to `targetPort` there. */
export async function startDelayProxy(targetPort: number): Promise<DelayProxy> {
  const links = new Set<Link>()
  let holding = false
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const upstream = net.connect({ host: REDIS_HOST, port: targetPort, allowHalfOpen: true })
    const link: Link = { upstream, client, kept: [], ended: false }
    links.add(link)
    upstream.pipe(client)
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
    async release() {
      holding = false
      const writes: Promise<void>[] = []
      for (const link of links) {
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
