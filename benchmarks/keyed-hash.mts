/**
 * What placing a new identity costs `storage: 'compact'` in Node, with the hand-written SipHash-2-4 and
 * with the keyed hashes of `@noble/hashes` (BLAKE2s and BLAKE3, one-shot and from a keyed state cloned
 * per call): the hash of a tag alone, then the layout's whole placement (`CompactLayout.map` of a pair
 * whose identity it has not seen: UTF-8 bytes, hash, bucket, field, key strings, remembered entry), the
 * candidates placing through a subclass whose `spot` differs only in the hash. Realistic tags: IPv4
 * addresses, account ids, and the 35-character `~h:` tag a long identity becomes.
 *
 * CPU time (user + system) of this process, not wall time, so other processes on the machine move it
 * less; cases alternate within each round. `node --import tsx benchmarks/keyed-hash.mts [rounds]`
 * (default 7): prints ns per call, the median and each round.
 * @module
 */
import { blake2s } from '@noble/hashes/blake2'
import { blake3 } from '@noble/hashes/blake3'
import { sha256 } from '@noble/hashes/sha2'
import { sipHash24 } from '../packages/core/src/hash'
import { identityTag } from '../packages/core/src/keys'
import { CompactLayout, type CompactSpot } from '../packages/core/src/stores/redis/compact'
import { FIELD_CHARS } from '../packages/core/src/stores/redis/wire'
import type { ResolvedPolicy, StoreEntry } from '../packages/core/src/types'
import { timeCases } from './lib/measure'

const ROUNDS = Number(process.argv[2] ?? 7)
const CALLS = 100_000
const SECRET = 'the-store-secret-1234'
const encoder = new TextEncoder()
const digest = sha256(encoder.encode(SECRET))
const tags = [
  ...Array.from({ length: 1000 }, (_, i) => `203.0.${i >> 8}.${i & 255}`),
  ...Array.from({ length: 1000 }, (_, i) => `user:${100000 + i * 7919}`),
  ...Array.from({ length: 1000 }, (_, i) => identityTag(`api-key:${'x'.repeat(200)}:${i}`)),
].map((t) => encoder.encode(t))

/** A keyed hash of `data` as the layout uses it: 64 bits, `[high, low]` words in `out`. */
type Keyed = (data: Uint8Array, out: Uint32Array) => void

const le32 = (h: Uint8Array, i: number) =>
  (h[i]! | (h[i + 1]! << 8) | (h[i + 2]! << 16) | (h[i + 3]! << 24)) >>> 0
function fromBytes(h: Uint8Array, out: Uint32Array): void {
  out[1] = le32(h, 0)
  out[0] = le32(h, 4)
}
const sipKey = new Uint32Array([le32(digest, 0), le32(digest, 4), le32(digest, 8), le32(digest, 12)])
const keyed2s = blake2s.create({ key: digest, dkLen: 8 })
const keyed3 = blake3.create({ key: digest, dkLen: 8 })

const hashes: Record<string, Keyed> = {
  'SipHash-2-4, hand-written': (d, out) => sipHash24(sipKey, d, d.length, out),
  'BLAKE2s keyed, one-shot': (d, out) => fromBytes(blake2s(d, { key: digest, dkLen: 8 }), out),
  'BLAKE2s keyed, cloned state': (d, out) => fromBytes(keyed2s.clone().update(d).digest(), out),
  'BLAKE3 keyed, one-shot': (d, out) => fromBytes(blake3(d, { key: digest, dkLen: 8 }), out),
  'BLAKE3 keyed, cloned state': (d, out) => fromBytes(keyed3.clone().update(d).digest(), out),
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
/** The layout with another hash: `spot` as CompactLayout's, the hash call aside. */
function layoutWith(hash: Keyed): CompactLayout {
  const bytes = new Uint8Array(4096)
  const out = new Uint32Array(2)
  return new (class extends CompactLayout {
    override spot(text: string, from: number, to: number): CompactSpot {
      let length = to - from
      let ascii = true
      for (let i = 0; i < length; i++) {
        const c = text.charCodeAt(from + i)
        if (c > 0x7f) {
          ascii = false
          break
        }
        bytes[i] = c
      }
      if (!ascii) length = encoder.encodeInto(text.slice(from, to), bytes).written
      hash(bytes.subarray(0, length), out)
      const bucket = out[1]! & 2047
      let n = out[0]! * 2 ** 21 + (out[1]! >>> 11)
      let field = ''
      for (let i = 0; i < FIELD_CHARS; i++) {
        field += B64[n % 64]
        n = Math.floor(n / 64)
      }
      return { bucket, field }
    }
  })(SECRET)
}

let sink = 0
const cases: [string, () => void][] = []
for (const [name, hash] of Object.entries(hashes)) {
  const out = new Uint32Array(2)
  cases.push([
    `hash: ${name}`,
    () => {
      for (let i = 0; i < CALLS; i++) {
        hash(tags[i % tags.length]!, out)
        sink ^= out[1]!
      }
    },
  ])
}
const POLICY: ResolvedPolicy = {
  name: 'default',
  algorithm: 'fixed-window',
  limit: 1,
  windowMs: 1000,
  burst: 1,
}
let fresh = 0
for (const [name, hash] of Object.entries(hashes)) {
  const make = name.startsWith('SipHash') ? () => new CompactLayout(SECRET) : () => layoutWith(hash)
  cases.push([
    `placement: ${name.startsWith('SipHash') ? 'CompactLayout as built' : name}`,
    () => {
      // a new layout per round and a new identity per call: every call misses the remembered entries
      const layout = make()
      for (let i = 0; i < CALLS; i++) {
        const id = `203.${(fresh >> 16) & 255}.${(fresh >> 8) & 255}.${fresh & 255}`
        fresh++
        const entry: StoreEntry = { policy: POLICY, key: `rl:{${id}}:fw-1s`, identity: id }
        sink ^= layout.map([entry])[0]!.key.length
      }
    },
  ])
}

timeCases(cases, ROUNDS, CALLS)
if (sink === 0.5) console.log(sink)
