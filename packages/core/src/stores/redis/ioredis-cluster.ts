/**
 * Routing of Tollgate's scripts on an ioredis `Cluster`, so that none waits in a queue of the cluster
 * client and is written after its caller was answered, whatever the cluster's options.
 *
 * Left to itself the cluster holds a command for later in four places: its own offline queue while it
 * is not ready, a node's offline queue while that node connects (nodes are created with
 * `enableOfflineQueue` forced on and connect lazily), its delay queue after "Connection is closed"
 * (`retryDelayOnFailover`), `CLUSTERDOWN` (`retryDelayOnClusterDown`) or `TRYAGAIN`, and a node that
 * reconnects by itself (`clusterNodeRetryStrategy`) resends the commands it had in flight. So:
 *
 * - a command is handed to the cluster only when the cluster is ready and the primary owning its slot
 *   has a writable connection: the cluster then writes it at once, on that connection;
 * - while that primary (or, at boot, the cluster) is still connecting, Tollgate holds the command itself
 *   and sends it on 'ready', unless a caller may have been answered meanwhile (a deadline passed, the
 *   client reported an error: see `ClientGuard.aborts`); then it is dropped, never written;
 * - of the cluster's retries only `MOVED` and `ASK` are left to it (answered before anything ran), towards
 *   a writable node and while no caller was answered; every other error goes to the caller as it is
 *   (`TRYAGAIN` is retried by the store while its caller waits);
 * - a node's in-flight commands are never resent on its reconnect (see `dropResendsOnClose`).
 * @module
 */
import { StoreError } from '../../errors'
import { type ClientGuard, dropResendsOnClose } from './connection'

/** The part of an ioredis `Command` used here. */
interface Command {
  getSlot(): number | undefined | null
  reject(error: unknown): void
  promise: Promise<unknown>
}

/** A command Tollgate holds while its node (or the cluster) connects. */
interface Held {
  command: Command
  /** `guard.aborts` when it was made: a change means its caller may have been answered. */
  ticket: number
}

/** States from which an ioredis client becomes ready by itself soon (or when kicked, for 'wait'). */
const CONNECTING = new Set(['wait', 'connecting', 'connect'])

/** Connection pools whose nodes already drop our resends on close. */
const WITHDRAWN = new WeakSet<object>()

const noop = () => {}

function writable(redis: any): boolean {
  return redis?.status === 'ready' && redis.stream?.writable !== false
}

export interface ClusterRouter {
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>
  eval(source: string, keys: string[], args: string[]): Promise<unknown>
}

const ROUTERS = new WeakMap<object, ClusterRouter>()

/** The router of a cluster client, one however many stores share it (its listeners are per node). */
export function ioredisClusterRouter(cluster: any, guard: ClientGuard): ClusterRouter {
  let router = ROUTERS.get(cluster)
  if (!router) {
    router = createRouter(cluster, guard)
    ROUTERS.set(cluster, router)
  }
  return router
}

function createRouter(cluster: any, guard: ClientGuard): ClusterRouter {
  const pool = cluster.connectionPool
  if (pool && typeof pool.on === 'function' && !WITHDRAWN.has(pool)) {
    WITHDRAWN.add(pool)
    pool.on('+node', (redis: any) => dropResendsOnClose(redis))
    for (const redis of typeof pool.getNodes === 'function' ? pool.getNodes('all') : []) {
      dropResendsOnClose(redis)
    }
  }
  const send: (command: unknown, ...rest: unknown[]) => unknown = cluster.sendCommand
  const waiting = new WeakMap<object, Held[]>()

  /** Holds a command until `emitter` (a node or the cluster) is ready; dropped if it closes first. */
  function hold(emitter: any, held: Held): void {
    let list = waiting.get(emitter)
    if (!list) {
      list = []
      waiting.set(emitter, list)
      const flush = (route: boolean) => {
        const all = waiting.get(emitter)
        if (!all || all.length === 0) return
        waiting.set(emitter, [])
        // A node that could not connect may have lost its slots (a failover): learn the new owner.
        if (!route && emitter !== cluster) cluster.refreshSlotsCache?.()
        for (const h of all) {
          if (route) dispatch(h)
          else fail(h.command, 'the Redis Cluster node for this call could not connect (not queued)')
        }
      }
      emitter.on('ready', () => flush(true))
      emitter.on('close', () => flush(false))
      emitter.on('end', () => flush(false))
    }
    list.push(held)
  }

  function fail(command: Command, reason: string): void {
    command.reject(new StoreError(reason))
  }

  /** Sends a command now, holds it while its node connects, or fails it: never into a client queue. */
  function dispatch(held: Held): void {
    const { command, ticket } = held
    if (guard.aborts !== ticket) {
      fail(command, 'the call was withdrawn before it was sent: its caller may have been answered')
      return
    }
    const status = cluster.status
    if (status !== 'ready') {
      if (status === 'wait') cluster.connect().catch(noop)
      if (CONNECTING.has(status)) hold(cluster, held)
      else fail(command, 'the Redis Cluster is not connected (the call was not queued)')
      return
    }
    const slot = command.getSlot()
    const address: string | undefined = typeof slot === 'number' ? cluster.slots?.[slot]?.[0] : undefined
    let redis = address === undefined ? undefined : pool?.getInstanceByKey?.(address)
    if (!redis && address !== undefined && typeof cluster.natMapper === 'function') {
      // The node's connection ended (a crashed primary, perhaps replaced by a replica by now): a fresh
      // one, connected below, and the slot map asked again.
      cluster.refreshSlotsCache?.()
      redis = pool?.findOrCreate?.(cluster.natMapper(address))
    }
    if (writable(redis)) {
      write(command, ticket)
      return
    }
    if (redis && CONNECTING.has(redis.status)) {
      if (redis.status === 'wait') redis.connect().catch(noop)
      hold(redis, held)
      return
    }
    cluster.refreshSlotsCache?.()
    fail(command, 'the Redis Cluster primary for this call is not connected (the call was not queued)')
  }

  /** Through the cluster (which writes it on the ready primary now), keeping only its safe redirections. */
  function write(command: Command, ticket: number): void {
    const own = command.reject
    send.call(cluster, command)
    const routed = command.reject
    if (routed === own) return
    command.reject = (error: unknown) => {
      const message = (error as { message?: unknown } | null)?.message
      const words = typeof message === 'string' ? message.split(' ') : []
      const redirect = words[0] === 'MOVED' || words[0] === 'ASK'
      if (
        redirect &&
        guard.aborts === ticket &&
        // a delayed MOVED would be resent from the cluster's delay queue, out of our sight
        (words[0] === 'ASK' || !(cluster.options?.retryDelayOnMoved > 0)) &&
        writable(pool?.getInstanceByKey?.(words[2]))
      ) {
        routed.call(command, error)
        return
      }
      // The slot map is stale after a redirection we did not follow, and may be after a lost connection
      // or CLUSTERDOWN (a failover under way).
      if (redirect || words[0] === 'CLUSTERDOWN' || message === 'Connection is closed.') {
        cluster.refreshSlotsCache?.()
      }
      own.call(command, error)
    }
  }

  // Commands are built by the cluster's own evalsha / eval (key prefix, argument transforms), through a
  // view that hands them to `capture` instead of sending them, and never auto-pipelines them.
  const view = Object.create(cluster, {
    options: { value: { ...cluster.options, enableAutoPipelining: false } },
    sendCommand: { value: capture },
  })
  // A command the cluster sends again (a redirection it follows) takes the cluster's own path: only its
  // first send is ours to route.
  const routed = new WeakSet<object>()
  function capture(command: Command, ...rest: unknown[]): Promise<unknown> {
    if (routed.has(command)) return send.call(cluster, command, ...rest) as Promise<unknown>
    routed.add(command)
    dispatch({ command, ticket: guard.aborts })
    return command.promise
  }
  return {
    evalsha: (sha, keys, args) => view.evalsha(sha, keys.length, ...keys, ...args),
    eval: (source, keys, args) => view.eval(source, keys.length, ...keys, ...args),
  }
}
