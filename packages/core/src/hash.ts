/**
 * SHA-256 comes from `@noble/hashes` (audited, synchronous, dependency-free, runs on Node, Bun, Deno and
 * edge workers, where `node:crypto` is absent and WebCrypto is async only): keys and partition keys are
 * built on the per-request path, so they need a synchronous, collision-resistant hash. The base64
 * encoders stay here: a few lines that need neither `btoa` nor `Buffer`, as fast as `@scure/base` and
 * faster than `btoa`, so a runtime dependency would buy nothing (benchmarks/encodings.mts).
 *
 * SipHash-2-4 stays hand-written: the keyed BLAKE2s and BLAKE3 of `@noble/hashes` cost more than ten
 * times as much per short tag and more than double the compact layout's placement of a new identity
 * (benchmarks/keyed-hash.mts), the path a flood of fresh identities takes on every request. It is
 * checked against the reference implementation's vectors (test/stores/compact.test.ts).
 * @module
 */
import { sha256 as nobleSha256 } from '@noble/hashes/sha2'

const encoder = new TextEncoder()

/** UTF-8 bytes of a string (one shared encoder). */
export function utf8(input: string): Uint8Array {
  return encoder.encode(input)
}

/** SHA-256 digest of a string (UTF-8) or bytes. */
export function sha256(input: string | Uint8Array): Uint8Array {
  return nobleSha256(typeof input === 'string' ? encoder.encode(input) : input)
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

/** Standard base64 (with padding) of bytes, without `btoa` or `Buffer`. */
export function base64(bytes: Uint8Array): string {
  let out = ''
  let i = 0
  // every byte index is below the length checked, and every B64 index is six bits
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + B64[n & 63]!
  }
  const rest = bytes.length - i
  if (rest === 1) {
    const n = bytes[i]! << 16
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + '=='
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8)
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + '='
  }
  return out
}

/** URL- and key-safe base64 without padding. */
export function base64Url(bytes: Uint8Array): string {
  return base64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/**
 * SipHash-2-4 of bytes `data[0..length)` under a 128-bit key (`key`: k0 low, k0 high, k1 low, k1 high,
 * as 32-bit words), the keyed hash Redis and most hash tables use against chosen inputs. Written in
 * 32-bit halves (JavaScript has no fast 64-bit integers); the result is `[high, low]` in `out`.
 */
export function sipHash24(key: Uint32Array, data: Uint8Array, length: number, out: Uint32Array): void {
  // the key is four words
  let v0h = (key[1]! ^ 0x736f6d65) >>> 0
  let v0l = (key[0]! ^ 0x70736575) >>> 0
  let v1h = (key[3]! ^ 0x646f7261) >>> 0
  let v1l = (key[2]! ^ 0x6e646f6d) >>> 0
  let v2h = (key[1]! ^ 0x6c796765) >>> 0
  let v2l = (key[0]! ^ 0x6e657261) >>> 0
  let v3h = (key[3]! ^ 0x74656462) >>> 0
  let v3l = (key[2]! ^ 0x79746573) >>> 0
  // Each 8-byte block (the last holds the bytes left and the length's low byte at the top) gets two
  // rounds, then the finalisation four: one loop, so the round is written once and nothing is captured.
  const blocks = (length >>> 3) + 1
  let ml = 0
  let mh = 0
  for (let b = 0; b <= blocks; b++) {
    let rounds = 4
    if (b < blocks) {
      const i = b * 8
      // a whole block ends at or before `length`, the last block's loop stops at it
      if (b < blocks - 1) {
        ml = (data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24)) >>> 0
        mh = (data[i + 4]! | (data[i + 5]! << 8) | (data[i + 6]! << 16) | (data[i + 7]! << 24)) >>> 0
      } else {
        ml = 0
        mh = (length & 0xff) << 24
        for (let j = 0; i + j < length; j++) {
          if (j < 4) ml |= data[i + j]! << (8 * j)
          else mh |= data[i + j]! << (8 * (j - 4))
        }
        ml >>>= 0
        mh >>>= 0
      }
      v3h = (v3h ^ mh) >>> 0
      v3l = (v3l ^ ml) >>> 0
      rounds = 2
    } else {
      v2l = (v2l ^ 0xff) >>> 0
    }
    for (let r = 0; r < rounds; r++) {
      let l = v0l + v1l
      v0h = (v0h + v1h + (l > 0xffffffff ? 1 : 0)) >>> 0
      v0l = l >>> 0
      let t = v1h
      v1h = (((v1h << 13) | (v1l >>> 19)) ^ v0h) >>> 0
      v1l = (((v1l << 13) | (t >>> 19)) ^ v0l) >>> 0
      t = v0h
      v0h = v0l
      v0l = t
      l = v2l + v3l
      v2h = (v2h + v3h + (l > 0xffffffff ? 1 : 0)) >>> 0
      v2l = l >>> 0
      t = v3h
      v3h = (((v3h << 16) | (v3l >>> 16)) ^ v2h) >>> 0
      v3l = (((v3l << 16) | (t >>> 16)) ^ v2l) >>> 0
      l = v0l + v3l
      v0h = (v0h + v3h + (l > 0xffffffff ? 1 : 0)) >>> 0
      v0l = l >>> 0
      t = v3h
      v3h = (((v3h << 21) | (v3l >>> 11)) ^ v0h) >>> 0
      v3l = (((v3l << 21) | (t >>> 11)) ^ v0l) >>> 0
      l = v2l + v1l
      v2h = (v2h + v1h + (l > 0xffffffff ? 1 : 0)) >>> 0
      v2l = l >>> 0
      t = v1h
      v1h = (((v1h << 17) | (v1l >>> 15)) ^ v2h) >>> 0
      v1l = (((v1l << 17) | (t >>> 15)) ^ v2l) >>> 0
      t = v2h
      v2h = v2l
      v2l = t
    }
    if (b < blocks) {
      v0h = (v0h ^ mh) >>> 0
      v0l = (v0l ^ ml) >>> 0
    }
  }
  out[0] = v0h ^ v1h ^ v2h ^ v3h
  out[1] = v0l ^ v1l ^ v2l ^ v3l
}
