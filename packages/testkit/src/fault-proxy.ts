/**
 * A TCP proxy in front of a redis-server that can fail the way networks do: it black-holes the
 * connections it has already established (bytes stop flowing both ways, nothing is closed, no FIN, no
 * RST: a NAT or load balancer that lost its state, a dead path) while it keeps accepting and forwarding
 * new connections. A client on a black-holed connection still reads "ready"; only new connections work.
 * @module
 */
import net from 'node:net'
import { REDIS_HOST } from './redis-server'

/** A running proxy. */
export interface FaultProxy {
  readonly port: number
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string
  /** Connections accepted so far (a reconnecting client adds one). */
  readonly accepted: number
  /**
   * Stops forwarding on every connection established so far, in both directions, without closing them:
   * the proxy stops reading from either side (the kernel buffers fill, then the writers stall) and
   * writes nothing. Connections accepted afterwards are forwarded normally.
   */
  blackhole(): void
  /** Destroys the black-holed connections: their clients now see the connection close. */
  cut(): void
  /** Closes the proxy and destroys every connection. */
  close(): Promise<void>
}

interface Pair {
  client: net.Socket
  upstream: net.Socket
}

/** Starts a proxy on a free port of 127.0.0.1 that forwards to `targetPort` there. */
export async function startFaultProxy(targetPort: number): Promise<FaultProxy> {
  const pairs = new Set<Pair>()
  let accepted = 0
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    accepted++
    const upstream = net.connect({ host: REDIS_HOST, port: targetPort, allowHalfOpen: true })
    const pair = { client, upstream }
    pairs.add(pair)
    const drop = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', drop)
    upstream.on('error', drop)
    client.on('close', drop)
    upstream.on('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, REDIS_HOST, () => resolve())
  })
  const port = (server.address() as net.AddressInfo).port
  const holes: Pair[] = []
  return {
    port,
    url: `redis://${REDIS_HOST}:${port}`,
    get accepted() {
      return accepted
    },
    blackhole() {
      for (const pair of pairs) {
        const { client, upstream } = pair
        client.unpipe(upstream)
        upstream.unpipe(client)
        // Stop reading: what is sent piles up in the kernel buffers, as on a path that drops packets.
        client.pause()
        upstream.pause()
        // A close from either side must not reach the other: nothing crosses a black hole.
        client.removeAllListeners('close')
        upstream.removeAllListeners('close')
        client.removeAllListeners('end')
        upstream.removeAllListeners('end')
        client.removeAllListeners('error')
        upstream.removeAllListeners('error')
        client.on('error', () => {})
        upstream.on('error', () => {})
        pairs.delete(pair)
        holes.push(pair)
      }
    },
    cut() {
      for (const { client, upstream } of holes) {
        client.destroy()
        upstream.destroy()
      }
      holes.length = 0
    },
    async close() {
      for (const { client, upstream } of [...pairs, ...holes]) {
        client.destroy()
        upstream.destroy()
      }
      pairs.clear()
      holes.length = 0
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
