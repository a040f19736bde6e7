/**
 * The client families RedisStore accepts, recognised by shape, each adapted to the {@link ScriptClient}
 * seam with what the store needs from it (connection watch, error guard, slot owners, deadline).
 * @module
 */

import { ConfigError } from '../../errors'
import {
  type BootGate,
  type BootHooks,
  bootGateOf,
  type ClientGuard,
  type ClientHooks,
  type ConnectionWatch,
  dropResendsOnClose,
  guardClient,
  watchOf,
} from './connection'
import { GlideScriptClient, isGlideClient, isGlideNoScript } from './glide-client'
import { isUpstashClient, RestScriptClient } from './http-client'
import { ioredisClusterRouter } from './ioredis-cluster'
import type { ScriptClient } from './script-client'

export type { ScriptClient } from './script-client'

/**
 * Which client family a store was given (for diagnostics). `'ioredis'` is also iovalkey, Valkey's fork of
 * ioredis, which Tollgate drives exactly the same way.
 */
export type ClientKind = 'node-redis' | 'ioredis' | 'valkey-glide' | 'upstash' | 'custom'

/** A client as the store drives it. */
export interface AdaptedClient {
  kind: ClientKind
  cluster: boolean
  run: ScriptClient
  /**
   * The connection watch of a standalone node-redis or ioredis client (undefined for clusters, where
   * per-node breakers and the deadline decide, and for custom clients).
   */
  watch?: ConnectionWatch
  /**
   * node-redis and ioredis (standalone or cluster): until the client's first connection, calls wait for
   * it (GLIDE and HTTP clients are connected once created).
   */
  gate?: BootGate
  /** node-redis and ioredis: Tollgate's own 'error' listener, and node-redis' write fence. */
  guard?: ClientGuard
  /** On a cluster: the address of the primary that owns a slot, as the client currently sees it. */
  nodeOf?: (slot: number) => string | undefined
  /**
   * Clients that can abort a request (Redis over HTTP) are told each limiter's deadline, and Valkey GLIDE,
   * whose own request timeout must not outlast it.
   */
  useDeadline?: (timeoutMs: number) => void
  /** How this client reports NOSCRIPT, when not by the reply's own error code (`isNoScript`, guard.ts). */
  noScript?: (error: unknown) => boolean
}

export function adaptClient(input: any): AdaptedClient {
  const client = input
  if (client && typeof client.defineCommand === 'function' && typeof client.evalsha === 'function') {
    // ioredis, and iovalkey (its fork: the same status, queues, 'close' order and resend behaviour the
    // hooks rely on). Redis.Cluster routes EVALSHA/EVAL by their first key (numkeys-aware key extraction).
    const cluster = client.isCluster === true
    let watch: ConnectionWatch | undefined
    if (!cluster) {
      watch = watchOf(client, () => {
        dropResendsOnClose(client)
        return ioredisHooks(client)
      })
    }
    const guard = guardClient(client, undefined)
    return {
      kind: 'ioredis',
      cluster,
      watch,
      gate:
        typeof client.status === 'string' && typeof client.on === 'function'
          ? bootGateOf(client, () => ioredisBoot(client))
          : undefined,
      guard,
      nodeOf: (slot) => client.slots?.[slot]?.[0],
      // A cluster's own routing would hold our calls in its queues (see ioredis-cluster.ts).
      run: cluster
        ? ioredisClusterRouter(client, guard)
        : {
            evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
            eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
          },
    }
  }
  if (client && typeof client.evalSha === 'function' && typeof client.eval === 'function') {
    // node-redis v6: client, cluster (routed by the first key) and pool all share this API. Its default
    // 5 s per-command timeout arms an AbortSignal per command; Tollgate's own deadline covers our calls.
    // Each command carries a fence generation's abortSignal instead (see WriteFence).
    const cluster = typeof client.getSlotMaster === 'function' && typeof client.nodeClient === 'function'
    const raw = input
    const watch =
      !cluster && typeof raw.isReady === 'boolean' && typeof raw.destroy === 'function'
        ? watchOf(raw, () => nodeRedisHooks(raw))
        : undefined
    const guard = guardClient(
      raw,
      typeof raw.withCommandOptions === 'function'
        ? (abortSignal) => raw.withCommandOptions({ timeout: 0, abortSignal })
        : undefined,
    )
    const fence = guard.fence
    // (a pool, or anything else without readiness and events, is sent to at once)
    const gate =
      typeof raw.isReady === 'boolean' && typeof raw.on === 'function'
        ? bootGateOf(raw, () => nodeRedisBoot(raw, cluster))
        : undefined
    if (!fence) {
      return {
        kind: 'node-redis',
        cluster,
        watch,
        gate,
        guard,
        nodeOf: (slot) => raw.slots?.[slot]?.master?.address,
        run: {
          evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
          eval: (source, keys, args) => client.eval(source, { keys, arguments: args }),
        },
      }
    }
    return {
      kind: 'node-redis',
      cluster,
      watch,
      gate,
      guard,
      nodeOf: (slot) => raw.slots?.[slot]?.master?.address,
      run: {
        evalsha: async (sha, keys, args) => {
          const g = fence.take()
          try {
            return await g.client.evalSha(sha, { keys, arguments: args })
          } finally {
            fence.done(g)
          }
        },
        eval: async (source, keys, args) => {
          const g = fence.take()
          try {
            return await g.client.eval(source, { keys, arguments: args })
          } finally {
            fence.done(g)
          }
        },
      },
    }
  }
  if (isGlideClient(client)) {
    // Valkey GLIDE: no events and no readiness to watch; its requestTimeout withdraws what it has not
    // written (see glide-client.ts).
    const glide = new GlideScriptClient(client)
    return {
      kind: 'valkey-glide',
      cluster: glide.cluster,
      run: glide,
      nodeOf: glide.cluster ? (slot) => glide.nodeOf(slot) : undefined,
      useDeadline: (ms) => glide.useDeadline(ms),
      noScript: isGlideNoScript,
    }
  }
  if (isUpstashClient(client)) {
    // @upstash/redis or @vercel/kv: connectionless, so never "reconnecting" (see http-client.ts).
    const rest = new RestScriptClient(client)
    return {
      kind: 'upstash',
      cluster: false,
      run: rest,
      useDeadline: (ms) => rest.useDeadline(ms),
    }
  }
  if (client && typeof client.evalsha === 'function' && typeof client.eval === 'function') {
    return {
      kind: 'custom',
      cluster: client.cluster === true,
      run: client as ScriptClient,
    }
  }
  throw new ConfigError(
    'store client',
    'a node-redis v6 client or cluster, an ioredis or iovalkey client or cluster, a Valkey GLIDE client or cluster client, an @upstash/redis (or @vercel/kv) client, or an object with evalsha(sha, keys, args) and eval(source, keys, args)',
    client,
    'type',
  )
}

// ---- what the connection watch needs from each family -----------------------------------------------

/** CONFIG GET replies: a flat [name, value, ...] array (RESP2, ioredis) or a map/object (RESP3). */
function configRecord(reply: unknown): Record<string, string> {
  const out: Record<string, string> = {}
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = String(reply[i + 1])
  } else if (reply instanceof Map) {
    for (const [k, v] of reply) out[String(k)] = String(v)
  } else if (reply && typeof reply === 'object') {
    for (const [k, v] of Object.entries(reply)) out[k] = String(v)
  }
  return out
}

/** node-redis v6 (a standalone client; clusters are not watched). */
function nodeRedisHooks(client: any): ClientHooks {
  return {
    isReady: () => client.isReady === true,
    recycle: () => {
      // No public way to drop only the socket: destroy() rejects every queued and in-flight command and
      // closes; connect() opens a fresh connection (a restart of the client, see docs/failure-modes.md).
      client.destroy()
      client.connect().catch(() => {})
    },
    config: async () => configRecord(await client.sendCommand(['CONFIG', 'GET', 'maxmemory*'])),
    onReady: (listener) => client.on('ready', listener),
  }
}

/** ioredis (a standalone client; clusters are not watched). */
function ioredisHooks(client: any): ClientHooks {
  return {
    isReady: () => client.status === 'ready',
    kick: () => {
      if (client.status === 'wait') client.connect().catch(() => {})
    },
    recycle: () => {
      // disconnect(true) ends the socket gracefully and waits for the peer (2 s by default): on a
      // connection that went silent, destroying the stream is what makes ioredis reconnect now.
      if (client.stream && typeof client.stream.destroy === 'function') client.stream.destroy()
      else client.disconnect(true)
    },
    config: async () => configRecord(await client.config('GET', 'maxmemory*')),
    onReady: (listener) => client.on('ready', listener),
  }
}

/** node-redis v6, client or cluster: a cluster is ready once its slots are discovered ('connect'). */
function nodeRedisBoot(client: any, cluster: boolean): BootHooks {
  return {
    isReady: () => client.isReady === true,
    onReady: (listener) => client.on(cluster ? 'connect' : 'ready', listener),
  }
}

/** ioredis and iovalkey, client or Cluster; a lazy one (`lazyConnect`) is connected by the first call. */
function ioredisBoot(client: any): BootHooks {
  return {
    isReady: () => client.status === 'ready',
    onReady: (listener) => client.on('ready', listener),
    kick: () => {
      if (client.status === 'wait') client.connect().catch(() => {})
    },
  }
}
