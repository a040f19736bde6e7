/**
 * The connection to one Redis or a Redis Cluster, checked first: a URL that is not one, a server that
 * does not answer, a cluster node without `--cluster` (or the reverse) are each one clear error.
 * @module
 */
import { createClient, createCluster } from 'redis'
import { CliError } from './errors'

/** The commands the CLI sends to one node. */
export interface NodeClient {
  scan(
    cursor: string,
    options: { MATCH: string; COUNT: number },
  ): Promise<{ cursor: unknown; keys: string[] }>
  del(keys: string[]): Promise<number>
  hExists(key: string, field: string): Promise<unknown>
  zRangeWithScores(key: string, min: number, max: number): Promise<Array<{ value: unknown; score: number }>>
}

export interface Connection {
  url: string
  /** A client for RedisStore (node-redis client or cluster). */
  client: any
  /** Whether `client` is a cluster client. */
  cluster: boolean
  /** The primary that owns `key`'s slot (the one node on a single Redis). */
  nodeFor(key: string): Promise<NodeClient>
  /** Every primary. */
  masters(): Promise<NodeClient[]>
  close(): Promise<void>
}

const CONNECT_TIMEOUT_MS = 3000

/** Connects after checking the URL, and that --cluster matches what the server is. */
export async function connect(values: { url?: string; cluster?: boolean }): Promise<Connection> {
  const url = values.url || process.env.REDIS_URL || 'redis://127.0.0.1:6379'
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new CliError(`--url '${url}' is not a URL: expected redis://host:port (or rediss://)`, 2)
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new CliError(
      `--url '${url}': expected the redis:// or rediss:// scheme, got '${parsed.protocol}'`,
      2,
    )
  }
  if (!parsed.hostname) throw new CliError(`--url '${url}': no host`, 2)
  const socket = { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: false as const }
  // Ask the node what it is first, so a cluster node given without --cluster (or the reverse) is a
  // clear error rather than MOVED replies or a cluster client that never converges.
  const probe = createClient({ url, socket })
  probe.on('error', () => {})
  try {
    await probe.connect()
  } catch (error) {
    const e = error as { code?: string; message?: string }
    throw new CliError(`cannot connect to ${url}: ${e.code ?? e.message ?? error}`)
  }
  let clusterEnabled: boolean
  try {
    const info = String(await probe.sendCommand(['INFO', 'cluster']))
    clusterEnabled = /cluster_enabled:1/.test(info)
  } finally {
    probe.destroy()
  }
  if (clusterEnabled && !values.cluster) {
    throw new CliError(
      `${url} is a node of a Redis Cluster: add --cluster (a single-node client would only get MOVED replies)`,
      2,
    )
  }
  if (!clusterEnabled && values.cluster) {
    throw new CliError(`${url} is not a cluster node (cluster_enabled:0): drop --cluster`, 2)
  }
  if (values.cluster) {
    const cluster = createCluster({ rootNodes: [{ url, socket }], defaults: { socket } })
    cluster.on('error', () => {})
    await cluster.connect()
    return {
      url,
      client: cluster,
      cluster: true,
      nodeFor: async (key) => (await cluster.getNodeClientForKey(key, false)) as unknown as NodeClient,
      masters: () =>
        Promise.all(cluster.masters.map((m) => cluster.nodeClient(m) as unknown as Promise<NodeClient>)),
      close: async () => cluster.destroy(),
    }
  }
  const client = createClient({ url, socket })
  client.on('error', () => {})
  await client.connect()
  const node = client as unknown as NodeClient
  return {
    url,
    client,
    cluster: false,
    nodeFor: async () => node,
    masters: async () => [node],
    close: async () => client.destroy(),
  }
}
