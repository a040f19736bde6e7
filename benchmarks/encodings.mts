/**
 * The hand-written encoders of @tollgate/core against what could replace them, per call on the request
 * path: base64 / base64url of a 32-byte SHA-256 digest (keys.ts hashes long identities, partition-key.ts
 * the `pk` of an identity) by core's encoder, by `@scure/base`, and by `btoa` over a binary string (both
 * run on every runtime; `Buffer` is Node's, shown as the floor only); and the Redis Cluster slot of a
 * pair key by core's table CRC16, a table-less bitwise CRC16, and `cluster-key-slot` (ioredis').
 *
 * CPU time (user + system) of this process; cases alternate within each round.
 * `node --import tsx benchmarks/encodings.mts [rounds]` (default 7): prints ns per call, the median and
 * each round.
 * @module
 */
import { createRequire } from 'node:module'
import { base64 as scure64, base64urlnopad as scure64Url } from '@scure/base'
import { base64, base64Url, sha256 } from '../packages/core/src/hash'
import { keySlot } from '../packages/core/src/stores/redis/cluster-slot'
import { timeCases } from './lib/measure'

// CommonJS without type declarations
const clusterKeySlot = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number

const ROUNDS = Number(process.argv[2] ?? 7)
const CALLS = 200_000
const digests = Array.from({ length: 1000 }, (_, i) => sha256(`identity-${i}`))
const keys = Array.from({ length: 1000 }, (_, i) => `rl:{203.0.${i >> 8}.${i & 255}}:fw-1s`)

function btoa64(bytes: Uint8Array): string {
  let s = ''
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]!)
  return btoa(s)
}
/** CRC16 (XModem) bit by bit, no table: the smallest code that gives the same slots. */
function bitwiseSlot(key: string): number {
  const open = key.indexOf('{')
  let start = 0
  let end = key.length
  if (open >= 0) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) {
      start = open + 1
      end = close
    }
  }
  let crc = 0
  for (let i = start; i < end; i++) {
    crc ^= key.charCodeAt(i) << 8
    for (let j = 0; j < 8; j++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc & 16383
}
for (const k of keys) {
  if (bitwiseSlot(k) !== keySlot(k) || clusterKeySlot(k) !== keySlot(k)) throw new Error(`slots differ: ${k}`)
}
for (const d of digests) {
  if (btoa64(d) !== base64(d) || scure64.encode(d) !== base64(d) || scure64Url.encode(d) !== base64Url(d)) {
    throw new Error('base64 differs')
  }
}

let sink = 0
const over =
  <T,>(xs: readonly T[], f: (x: T) => string | number) =>
  () => {
    for (let i = 0; i < CALLS; i++) {
      const r = f(xs[i % xs.length]!)
      sink ^= typeof r === 'number' ? r : r.length
    }
  }
const cases: [string, () => void][] = [
  ['base64: core (hand-written)', over(digests, base64)],
  ['base64: @scure/base', over(digests, (d) => scure64.encode(d))],
  ['base64: btoa of a binary string', over(digests, btoa64)],
  [
    'base64: Buffer (Node only, floor)',
    over(digests, (d) => Buffer.from(d.buffer, d.byteOffset, d.length).toString('base64')),
  ],
  ['base64url: core (hand-written)', over(digests, base64Url)],
  ['base64url: @scure/base', over(digests, (d) => scure64Url.encode(d))],
  ['slot: core (table CRC16)', over(keys, keySlot)],
  ['slot: bitwise CRC16, no table', over(keys, bitwiseSlot)],
  ['slot: cluster-key-slot', over(keys, clusterKeySlot)],
]

timeCases(cases, ROUNDS, CALLS)
if (sink === 0.5) console.log(sink)
