/**
 * The seam between RedisStore and a Redis client: running a Lua script by its SHA1, or by its source.
 * @module
 */

/**
 * The only two commands Tollgate needs. Implement it to use any client (Valkey GLIDE, an HTTP Redis, a
 * Python sidecar...). Errors must be thrown with the server's message (Tollgate looks for `NOSCRIPT`).
 *
 * @example
 * const store = new RedisStore({
 *   evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
 *   eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
 * })
 */
export interface ScriptClient {
  evalsha(sha1: string, keys: string[], args: string[]): Promise<unknown>
  eval(source: string, keys: string[], args: string[]): Promise<unknown>
  /**
   * `true` when the client talks to a Redis Cluster and routes each script by its first key: calls whose
   * keys live in different hash slots are then split into one script per slot.
   * @default false
   */
  readonly cluster?: boolean
}
