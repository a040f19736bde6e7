/**
 * The `pk` parameter of the `'ietf'` RateLimit fields: a short hash of a policy's key, so a client can
 * tell partitions apart without the key itself being sent.
 * @module
 */
import { base64, sha256 } from '@tollgate/core/internal'

/**
 * Computes the partition key of an identity: the base64 text that goes between the colons of `pk=:…:`.
 * @example
 * const pkFor: PartitionKeyFn = (key) => myHmacBase64(secret, key)
 */
export type PartitionKeyFn = (key: string) => string

/** Bytes of SHA-256 kept for `pk`: 96 bits, 16 base64 chars without padding. */
const PK_BYTES = 12
/**
 * Partition keys of recent identities: hashing is the expensive part of the headers (a SHA-256 in
 * JavaScript per response). Comfortably above the deny cache's 10,000 default, so a server's active
 * identities stay in it (a FIFO one entry too small for identities that come round in turn misses
 * every time); bounded in memory by the key length limit below.
 */
const PK_CACHE_MAX = 16_384
/** Identities longer than this are hashed every time rather than kept alive in the cache. */
const PK_CACHE_MAX_KEY = 256
const pkCache = new Map<string, string>()

/**
 * The `'ietf'` partition key of an identity: base64 of the first 12 bytes of its SHA-256 (16 chars). It
 * lets a client tell partitions apart without revealing the key. It is not a secret: an identity from a
 * small space (an IPv4 address) can be recovered by trying every candidate.
 *
 * @example
 * partitionKey('ip:1.2.3.4') // 16 base64 chars, the same for every call with this key
 */
export function partitionKey(key: string): string {
  let pk = pkCache.get(key)
  if (pk !== undefined) return pk
  pk = base64(sha256(key).subarray(0, PK_BYTES))
  if (key.length <= PK_CACHE_MAX_KEY) {
    // Insertion order makes this FIFO: cheap, bounded, and hot clients are re-added on their next miss.
    if (pkCache.size >= PK_CACHE_MAX) pkCache.delete(pkCache.keys().next().value as string)
    pkCache.set(key, pk)
  }
  return pk
}

/** The partition key function the `partitionKey` header option names: the default, none, or its own. */
export function resolvePk(pk: boolean | PartitionKeyFn | undefined): PartitionKeyFn | undefined {
  if (pk === undefined || pk === true) return partitionKey
  return pk === false ? undefined : pk
}
