/**
 * A throwaway Redis Cluster (3 primaries by default, optionally one replica each) of real redis-server
 * processes, for the cluster suite: hash-slot routing, CROSSSLOT errors and failover only show up there.
 * @module
 */
import { execFile } from 'node:child_process'
import {
  freePorts,
  REDIS_HOST,
  type RedisServerHandle,
  RedisStartError,
  redisCli,
  startRedisServer,
} from './redis-server'
import { respCommand } from './resp'

const SLOTS = 16384
const PORT_ATTEMPTS = 5

/** One node of a {@link RedisClusterHandle}. */
export interface ClusterNode {
  readonly host: string
  readonly port: number
  /** `redis://127.0.0.1:<port>` */
  readonly url: string
  /** Pid of the node's current process (a restart changes it). */
  readonly pid: number
  /** The node's role once the cluster was formed (a failover can change it later). */
  readonly role: 'primary' | 'replica'
}

/** Options for {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /** Number of primaries; `redis-cli --cluster create` needs at least 3. @default 3 */
  primaries?: number
  /** Replicas per primary. @default 0 */
  replicasPerPrimary?: 0 | 1
  /**
   * `cluster-node-timeout`: how long before a silent node counts as failed and its replica takes over.
   * Lower than Redis' 15 s default so failover tests finish. @default 5000
   */
  nodeTimeoutMs?: number
  /** Budget for the whole start: nodes, `--cluster create` and convergence. @default 30000 */
  startTimeoutMs?: number
}

/** A running cluster owned by the test that started it. */
export interface RedisClusterHandle {
  readonly nodes: ClusterNode[]
  /** Every node's URL, in the shape `createCluster({ rootNodes })` (node-redis) expects. */
  readonly rootNodes: { url: string }[]
  /** Stops every node that is still running (SIGTERM, waits for exit). */
  stop(): Promise<void>
  /** SIGKILLs one node and waits for it to exit: a crashed shard, as the clients see it. */
  killNode(port: number): Promise<void>
  /**
   * Starts a killed node again on its port with its `nodes.conf` (same node id, epoch and slots) and an
   * empty dataset: a crashed primary coming back without its data. Resolves once it answers PING; use
   * {@link RedisClusterHandle.waitOk} for the cluster to accept writes on its slots again.
   */
  restartNode(port: number): Promise<void>
  /**
   * Resolves once every running node reports `cluster_state:ok`, all slots assigned and ok, and every
   * node known (a restarted primary stays in `fail` for about two seconds before taking writes).
   */
  waitOk(timeoutMs?: number): Promise<void>
  /** Runs one command on one node through `redis-cli -e` (no `-c`: no redirects are followed). */
  command(port: number, ...args: string[]): Promise<string>
}

/** Parses `CLUSTER INFO` / `INFO` text into key → value. */
function parseInfo(text: unknown): Map<string, string> {
  const map = new Map<string, string>()
  for (const line of String(text).split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0) map.set(line.slice(0, i), line.slice(i + 1))
  }
  return map
}

async function startNode(nodeTimeoutMs: number): Promise<RedisServerHandle> {
  for (let attempt = 1; ; attempt++) {
    const [port, busPort] = await freePorts(2)
    try {
      return await startRedisServer({
        port,
        // nodes.conf must survive a kill, so that restartNode() brings the node back with its slots.
        keepDir: true,
        args: [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          // An explicit bus port: the default (port + 10000) overflows for ports above 55535.
          '--cluster-port',
          String(busPort),
          '--cluster-node-timeout',
          String(nodeTimeoutMs),
          // Redis 7 waits 5 s for more replicas before a diskless full sync; a test has no more coming.
          '--repl-diskless-sync-delay',
          '0',
        ],
      })
    } catch (err) {
      if (!(err instanceof RedisStartError && err.addressInUse) || attempt >= PORT_ATTEMPTS) throw err
    }
  }
}

function clusterCreate(ports: number[], replicas: number, timeoutMs: number): Promise<void> {
  const args = ['--cluster', 'create', ...ports.map((p) => `${REDIS_HOST}:${p}`)]
  args.push('--cluster-replicas', String(replicas), '--cluster-yes')
  return new Promise((resolve, reject) => {
    execFile(
      'redis-cli',
      args,
      { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`redis-cli ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`))
        else resolve()
      },
    )
  })
}

/** Why a node is not ready yet, or `undefined` when it is. */
async function notReadyReason(port: number, total: number): Promise<string | undefined> {
  const info = parseInfo(await respCommand(port, ['CLUSTER', 'INFO']))
  if (info.get('cluster_state') !== 'ok') return `cluster_state:${info.get('cluster_state')}`
  if (info.get('cluster_slots_assigned') !== String(SLOTS))
    return `slots_assigned:${info.get('cluster_slots_assigned')}`
  if (info.get('cluster_slots_ok') !== String(SLOTS)) return `slots_ok:${info.get('cluster_slots_ok')}`
  if (info.get('cluster_known_nodes') !== String(total))
    return `known_nodes:${info.get('cluster_known_nodes')}`
  const repl = parseInfo(await respCommand(port, ['INFO', 'replication']))
  if (repl.get('role') === 'slave' && repl.get('master_link_status') !== 'up') return 'replica link down'
  return undefined
}

async function waitConverged(ports: number[], deadline: number, total = ports.length): Promise<void> {
  for (;;) {
    const reasons = await Promise.all(
      ports.map((p) => notReadyReason(p, total).catch((err: Error) => `error: ${err.message}`)),
    )
    const pending = reasons.map((r, i) => (r ? `${ports[i]}: ${r}` : '')).filter(Boolean)
    if (pending.length === 0) return
    if (Date.now() > deadline) throw new Error(`cluster did not converge in time: ${pending.join('; ')}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * Starts `primaries × (1 + replicasPerPrimary)` cluster-enabled redis-servers on free ports, joins them with
 * `redis-cli --cluster create … --cluster-replicas N --cluster-yes`, and resolves once every node reports
 * `cluster_state:ok`, all 16384 slots assigned and ok, every node known, and every replica's link up.
 * On failure every started node is stopped before the error is thrown.
 */
export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const primaries = opts.primaries ?? 3
  const replicas = opts.replicasPerPrimary ?? 0
  if (!Number.isInteger(primaries) || primaries < 3)
    throw new Error('a Redis Cluster needs at least 3 primaries')
  const timeoutMs = opts.startTimeoutMs ?? 30_000
  const deadline = Date.now() + timeoutMs
  const total = primaries * (1 + replicas)
  const servers: RedisServerHandle[] = []
  const stopAll = () => Promise.all(servers.map((s) => s.stop())).then(() => undefined)
  try {
    const started = await Promise.allSettled(
      Array.from({ length: total }, () => startNode(opts.nodeTimeoutMs ?? 5000)),
    )
    for (const r of started) if (r.status === 'fulfilled') servers.push(r.value)
    const failed = started.find((r) => r.status === 'rejected')
    if (failed) throw (failed as PromiseRejectedResult).reason
    const ports = servers.map((s) => s.port)
    await clusterCreate(ports, replicas, Math.max(1, deadline - Date.now()))
    await waitConverged(ports, deadline)
    const roles = await Promise.all(ports.map((p) => respCommand(p, ['ROLE'])))
    const nodes: ClusterNode[] = servers.map((s, i) => ({
      host: s.host,
      port: s.port,
      url: s.url,
      get pid() {
        return s.pid
      },
      role: (roles[i] as string[])[0] === 'master' ? 'primary' : 'replica',
    }))
    const byPort = new Map(servers.map((s) => [s.port, s]))
    const server = (port: number) => {
      const s = byPort.get(port)
      if (!s) throw new Error(`no cluster node on port ${port}`)
      return s
    }
    return {
      nodes,
      rootNodes: nodes.map((n) => ({ url: n.url })),
      stop: stopAll,
      killNode: (port) => server(port).kill(),
      restartNode: (port) => server(port).start(),
      waitOk: (ms = timeoutMs) =>
        waitConverged(
          servers.filter((s) => s.running).map((s) => s.port),
          Date.now() + ms,
          servers.length,
        ),
      command: (port, ...args) => redisCli(server(port).port, args),
    }
  } catch (err) {
    await stopAll()
    throw err
  }
}
