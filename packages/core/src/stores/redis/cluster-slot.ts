/**
 * Redis Cluster hash slots, computed in JS exactly as the server does (cluster-spec: "HASH_SLOT =
 * CRC16(key) mod 16384", hashing only the hash tag when there is one), so a store can tell before any
 * round trip which keys of one call can share an atomic script. Runtime-neutral: no `node:` imports.
 *
 * Hand-written, not `cluster-key-slot` (ioredis's): that package is CommonJS only and builds a JS array of
 * UTF-8 bytes per key on the request path, and it and a table-less CRC16 each cost about three times
 * this table's per key (benchmarks/encodings.mts). This is allocation-free for ASCII keys, and tested
 * against the server's own `CLUSTER KEYSLOT` (packages/core/test/stores/cluster.test.ts).
 * @module
 */

/** Number of hash slots in a Redis Cluster. */
export const SLOTS = 16384

// CRC16-CCITT (XModem): polynomial 0x1021, initial value 0, no reflection: the variant Redis uses.
const TABLE = new Uint16Array(256)
for (let i = 0; i < 256; i++) {
  let crc = i << 8
  for (let j = 0; j < 8; j++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  TABLE[i] = crc
}

const encoder = new TextEncoder()

/**
 * CRC16 (XModem) of the UTF-8 bytes of `input[start, end)`.
 *
 * @example
 * crc16('123456789') // 0x31c3, the check value of CRC-16/XMODEM
 */
export function crc16(input: string, start = 0, end = input.length): number {
  let crc = 0
  for (let i = start; i < end; i++) {
    const c = input.charCodeAt(i)
    if (c >= 0x80) return crc16Bytes(encoder.encode(input.slice(start, end)))
    crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ c) & 0xff]! // a byte indexes the 256-entry table
  }
  return crc
}

function crc16Bytes(bytes: Uint8Array): number {
  let crc = 0
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ bytes[i]!) & 0xff]!
  return crc
}

/**
 * The part of a key Redis hashes: the text between the first `{` and the next `}` when it is not empty,
 * else the whole key. Returned as `[start, end)` offsets into the key.
 *
 * @example
 * hashTagRange('login:{ip:1.2.3.4}:ip') // [7, 17]: 'ip:1.2.3.4'
 * hashTagRange('foo{}{bar}')            // [0, 10]: an empty tag means the whole key
 */
export function hashTagRange(key: string): [number, number] {
  const open = key.indexOf('{')
  if (open >= 0) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) return [open + 1, close]
  }
  return [0, key.length]
}

/**
 * The hash slot of a key (0..16383), as `CLUSTER KEYSLOT` answers.
 *
 * @example
 * keySlot('tollgate:{user:42}') === keySlot('{user:42}') // true: only the tag is hashed
 */
export function keySlot(key: string): number {
  const [start, end] = hashTagRange(key)
  return crc16(key, start, end) & (SLOTS - 1)
}

/** Whether two keys share a hash tag (then they share a slot, with no CRC needed to know it). */
export function sameHashTag(a: string, b: string): boolean {
  const [as, ae] = hashTagRange(a)
  const [bs, be] = hashTagRange(b)
  return ae - as === be - bs && a.startsWith(b.slice(bs, be), as)
}
