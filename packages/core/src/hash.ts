/**
 * SHA-256 comes from `@noble/hashes` (audited, synchronous, dependency-free, runs on Node, Bun, Deno and
 * edge workers, where `node:crypto` is absent and WebCrypto is async only): keys and partition keys are
 * built on the per-request path, so they need a synchronous, collision-resistant hash. The base64
 * encoders stay here: a few lines that need neither `btoa` nor `Buffer`.
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
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2]
    out += B64[n >> 18] + B64[(n >> 12) & 63] + B64[(n >> 6) & 63] + B64[n & 63]
  }
  const rest = bytes.length - i
  if (rest === 1) {
    const n = bytes[i] << 16
    out += B64[n >> 18] + B64[(n >> 12) & 63] + '=='
  } else if (rest === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8)
    out += B64[n >> 18] + B64[(n >> 12) & 63] + B64[(n >> 6) & 63] + '='
  }
  return out
}

/** URL- and key-safe base64 without padding. */
export function base64Url(bytes: Uint8Array): string {
  return base64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}
