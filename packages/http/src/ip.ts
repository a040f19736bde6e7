/**
 * Client-IP canonicalisation: one client, one key, whatever spelling the address arrives in.
 *
 * A rate limiter keyed on raw `req.ip` text is bypassed by re-spelling the address (`::FFFF:1.2.3.4`,
 * `0:0:0:0:0:ffff:102:304`, `[::1]:443`, `fe80::1%eth0`) and by stepping through an IPv6 allocation
 * (one subscriber usually holds a /56 or a /64, i.e. 2^64+ addresses). It is turned into a denial of
 * service when many clients collapse into one key (every IPv4-mapped client masked to one `::/56`).
 * So the parser here works on the numeric address, not its text:
 *
 * - IPv4 is strict dotted-decimal: four octets 0-255, no leading zeros (`01.2.3.4` is rejected, because
 *   `inet_aton` reads it as octal and other components would disagree about which client it is).
 * - IPv4-mapped IPv6 (`::ffff:0:0/96`, any spelling) and the NAT64 well-known prefix (`64:ff9b::/96`,
 *   RFC 6052) carry a real IPv4 client and become that IPv4 address. No other embedded form does:
 *   `2001:db8::1.2.3.4` and the deprecated IPv4-compatible `::1.2.3.4` stay IPv6, because their sender
 *   chooses the low 32 bits and could otherwise pick a real IPv4 client's key.
 * - IPv6 is parsed to eight 16-bit groups, masked to `ipv6Subnet` bits and printed in RFC 5952 form with
 *   a `/<bits>` suffix, so a masked network never equals a host key.
 *
 * No regular expressions: the parser is a single linear scan (it runs on every request).
 *
 * Hand-written, not `ipaddr.js`: that library allocates objects per parse, leaves brackets, ports, zone ids,
 * NAT64 and subnet masking to the caller, and reads the IPv4-compatible `::1.2.3.4` as the mapped
 * `::ffff:1.2.3.4` (a client-chosen spelling that would take the IPv4 client's key); it serves as the
 * oracle of a property test instead (packages/http/src/ip.test.ts).
 * @module
 */

/**
 * Options of {@link canonicalIp}.
 * @example
 * canonicalIp(req.ip, { ipv6Subnet: 64 }) // one key per /64
 */
export interface CanonicalIpOptions {
  /**
   * Prefix length IPv6 clients are grouped by, an integer from 32 to 128; `false` (or 128) keeps each
   * address apart. ISPs hand a subscriber a /48 to /64, so /56 groups one subscriber without merging
   * many. IPv4 addresses are never masked.
   * @default 56
   */
  ipv6Subnet?: number | false
}

/**
 * Default IPv6 prefix length: one subscriber's allocation, without merging many.
 * @example
 * canonicalIp('2001:db8::1') === canonicalIp('2001:db8::1', { ipv6Subnet: DEFAULT_IPV6_SUBNET }) // true
 */
export const DEFAULT_IPV6_SUBNET = 56

const MIN_SUBNET = 32
const MAX_SUBNET = 128
/** Longest input considered: bracketed full IPv6 + zone id + port fits with room to spare. */
const MAX_INPUT = 128

const COLON = 0x3a
const DOT = 0x2e
const PERCENT = 0x25
const OPEN = 0x5b
const D0 = 0x30
const D9 = 0x39

// Scratch for the per-request path; parsing is synchronous, so one buffer is enough.
const groups = new Uint16Array(8)

/**
 * Validates an `ipv6Subnet` option once, at construction.
 *
 * @returns the prefix length, or `false` for "no masking" (128 is returned as `false`: same key).
 * @throws RangeError naming `ipv6Subnet` and the value received, for anything but an integer in
 * 32..128 or `false`.
 * @example
 * resolveIpv6Subnet(undefined) // 56
 * resolveIpv6Subnet(64)        // 64
 * resolveIpv6Subnet(20)        // throws RangeError: ipv6Subnet must be an integer from 32 to 128 or false, received 20
 */
export function resolveIpv6Subnet(value: unknown): number | false {
  if (value === undefined) return DEFAULT_IPV6_SUBNET
  if (value === false) return false
  if (typeof value !== 'number' || !Number.isInteger(value) || value < MIN_SUBNET || value > MAX_SUBNET) {
    throw new RangeError(
      `ipv6Subnet must be an integer from ${MIN_SUBNET} to ${MAX_SUBNET} or false, received ${describe(value)}`,
    )
  }
  return value === MAX_SUBNET ? false : value
}

/**
 * The rate-limit key for a client address: strict IPv4, or IPv6 masked to `ipv6Subnet` bits.
 *
 * Accepts, after trimming: `1.2.3.4`, `1.2.3.4:8080`, any IPv6 spelling (case, zero padding, `::`,
 * dotted tail), `[v6]`, `[v6]:443`, and a zone id (`fe80::1%eth0`, `[fe80::1%25eth0]:443`), which is
 * dropped. Never returns an empty or shared placeholder: an address it cannot read is an error, so the
 * caller decides (reject the request, or key on something else) instead of pooling every such client.
 *
 * @throws TypeError when `raw` is missing or is not an IP address; RangeError for a bad `ipv6Subnet`.
 * @example
 * canonicalIp('::ffff:1.2.3.4')              // '1.2.3.4'
 * canonicalIp('[2001:DB8:0:12ab::1]:443')    // '2001:db8:0:1200::/56'
 * canonicalIp('2001:db8::1', { ipv6Subnet: false }) // '2001:db8::1'
 */
export function canonicalIp(raw: string | null | undefined, opts?: CanonicalIpOptions): string {
  const subnet = opts === undefined || opts.ipv6Subnet === undefined ? DEFAULT_IPV6_SUBNET : opts.ipv6Subnet
  const bits = subnet === DEFAULT_IPV6_SUBNET ? subnet : resolveIpv6Subnet(subnet)
  if (typeof raw !== 'string') {
    throw new TypeError(`client IP address is missing (received ${describe(raw)})`)
  }
  const key = canonicalize(raw, bits)
  if (key === undefined) {
    throw new TypeError(`client IP address ${describe(raw)} is not a valid IPv4 or IPv6 address`)
  }
  return key
}

/**
 * Whether {@link canonicalIp} accepts the text (any spelling it accepts: brackets, port, zone id).
 *
 * @example
 * isIp('[::1]:80') // true
 * isIp('1.2.3')    // false
 */
export function isIp(raw: unknown): boolean {
  return typeof raw === 'string' && canonicalize(raw, false) !== undefined
}

/**
 * Parses a bare IPv6 address (no brackets, port or zone id) into its eight 16-bit groups.
 *
 * @returns a new array of 8 groups, or `undefined` when the text is not an IPv6 address.
 * @example
 * parseIpv6('2001:db8::1.2.3.4') // Uint16Array [0x2001, 0xdb8, 0, 0, 0, 0, 0x102, 0x304]
 * parseIpv6('1.2.3.4')           // undefined
 */
export function parseIpv6(text: string): Uint16Array | undefined {
  return parseV6(text, 0, text.length) ? groups.slice() : undefined
}

/**
 * Prints eight 16-bit groups in the RFC 5952 canonical form: lower case, no leading zeros, the longest
 * run (first on a tie) of two or more zero groups compressed to `::`. Always hexadecimal, also for
 * embedded IPv4.
 *
 * @example
 * formatIpv6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1]) // '2001:db8::1:0:0:1'
 */
export function formatIpv6(g: ArrayLike<number>): string {
  // Longest run of zero groups, first one on a tie; runs of one are not compressed (RFC 5952 §4.2.2).
  let bestStart = -1
  let bestLen = 1
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++
      continue
    }
    let j = i + 1
    while (j < 8 && g[j] === 0) j++
    if (j - i > bestLen) {
      bestStart = i
      bestLen = j - i
    }
    i = j
  }
  let out = ''
  for (let i = 0; i < 8; i++) {
    if (i === bestStart) {
      out += '::'
      i += bestLen - 1
      continue
    }
    if (out.length > 0 && out.charCodeAt(out.length - 1) !== COLON) out += ':'
    out += g[i]!.toString(16) // an address has eight groups
  }
  return out
}

/** The whole pipeline without throwing: canonical key, or `undefined` when the text is not an address. */
function canonicalize(raw: string, bits: number | false): string | undefined {
  let s = raw
  if (s.length > 0 && (isSpace(s.charCodeAt(0)) || isSpace(s.charCodeAt(s.length - 1)))) s = s.trim()
  const len = s.length
  if (len === 0 || len > MAX_INPUT) return undefined

  let start = 0
  let end = len
  if (s.charCodeAt(0) === OPEN) {
    // [v6], [v6]:port, [v6%zone]:port
    const close = s.indexOf(']')
    if (close < 0) return undefined
    if (close + 1 < len && (s.charCodeAt(close + 1) !== COLON || !isPort(s, close + 2, len))) return undefined
    start = 1
    end = zoneEnd(s, 1, close)
    if (end < 0 || !parseV6(s, start, end)) return undefined
    return v6Key(bits)
  }

  const firstColon = s.indexOf(':')
  if (firstColon < 0) return ipv4Key(s, 0, len)
  if (s.indexOf(':', firstColon + 1) < 0) {
    // Exactly one colon: IPv4 with a port (an IPv6 address has at least two).
    return isPort(s, firstColon + 1, len) ? ipv4Key(s, 0, firstColon) : undefined
  }
  end = zoneEnd(s, start, len)
  if (end < 0 || !parseV6(s, start, end)) return undefined
  return v6Key(bits)
}

/** Where the address ends before an optional `%zone` (which must be non-empty); -1 when malformed. */
function zoneEnd(s: string, start: number, end: number): number {
  for (let i = start; i < end; i++) {
    if (s.charCodeAt(i) === PERCENT) return i + 1 < end ? i : -1
  }
  return end
}

function isPort(s: string, start: number, end: number): boolean {
  const n = end - start
  if (n < 1 || n > 5) return false
  let port = 0
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i)
    if (c < D0 || c > D9) return false
    port = port * 10 + (c - D0)
  }
  return port <= 65535
}

function ipv4Key(s: string, start: number, end: number): string | undefined {
  if (parseV4(s, start, end) < 0) return undefined
  // Strict parsing admits exactly one spelling per address, so the text already is the canonical form.
  return start === 0 && end === s.length ? s : s.slice(start, end)
}

/**
 * Strict dotted-decimal IPv4 in `s[start, end)`: four octets of 1-3 digits, each 0-255, no leading zero.
 * @returns the address as an unsigned 32-bit number, or -1.
 */
function parseV4(s: string, start: number, end: number): number {
  let value = 0
  let octets = 0
  let i = start
  while (true) {
    const first = i
    let octet = 0
    while (i < end) {
      const c = s.charCodeAt(i)
      if (c < D0 || c > D9) break
      octet = octet * 10 + (c - D0)
      i++
      if (i - first > 3) return -1
    }
    const digits = i - first
    if (digits === 0 || octet > 255 || (digits > 1 && s.charCodeAt(first) === D0)) return -1
    value = value * 256 + octet
    octets++
    if (octets === 4) return i === end ? value : -1
    if (i >= end || s.charCodeAt(i) !== DOT) return -1
    i++
  }
}

/** Value of a hex digit, or -1. */
function hexValue(c: number): number {
  if (c >= D0 && c <= D9) return c - D0
  const lower = c | 0x20
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10
  return -1
}

/**
 * IPv6 in `s[start, end)` into `groups`: 1-4 hex digits per group, at most one `::` (standing for at
 * least one zero group), optionally a strict dotted IPv4 tail in place of the last two groups.
 */
function parseV6(s: string, start: number, end: number): boolean {
  let n = 0 // groups written
  let gap = -1 // index in `groups` where `::` stands
  let i = start
  if (end - start < 2) return false
  if (s.charCodeAt(i) === COLON) {
    if (s.charCodeAt(i + 1) !== COLON) return false
    gap = 0
    i += 2
    if (i === end) {
      groups.fill(0)
      return true
    }
  }
  while (true) {
    const first = i
    let value = 0
    while (i < end && i - first < 5) {
      const h = hexValue(s.charCodeAt(i))
      if (h < 0) break
      value = value * 16 + h
      i++
    }
    if (i < end && s.charCodeAt(i) === DOT) {
      // Dotted IPv4 tail: only as the last two groups.
      if (n > 6) return false
      const v4 = parseV4(s, first, end)
      if (v4 < 0) return false
      groups[n++] = v4 >>> 16
      groups[n++] = v4 & 0xffff
      break
    }
    const digits = i - first
    if (digits === 0 || digits > 4 || n === 8) return false
    groups[n++] = value
    if (i === end) break
    if (s.charCodeAt(i) !== COLON) return false
    i++
    if (i === end) return false // a single trailing colon
    if (s.charCodeAt(i) === COLON) {
      if (gap >= 0) return false
      gap = n
      i++
      if (i === end) break
    }
  }
  if (gap < 0) return n === 8
  if (n > 7) return false
  // Move the groups after `::` to the end and zero the hole.
  const tail = n - gap
  for (let k = 1; k <= tail; k++) groups[8 - k] = groups[n - k]!
  for (let k = gap; k < 8 - tail; k++) groups[k] = 0
  return true
}

/** Key for the address in `groups`: its IPv4 client when it carries one, else the masked network. */
function v6Key(bits: number | false): string {
  // `groups` holds eight, and every index below is one of them
  const g = groups
  if (g[2] === 0 && g[3] === 0 && g[4] === 0) {
    // ::ffff:a.b.c.d (IPv4-mapped) and 64:ff9b::a.b.c.d (NAT64 well-known prefix, RFC 6052 §2.1).
    if ((g[0] === 0 && g[1] === 0 && g[5] === 0xffff) || (g[0] === 0x64 && g[1] === 0xff9b && g[5] === 0)) {
      return `${g[6]! >>> 8}.${g[6]! & 0xff}.${g[7]! >>> 8}.${g[7]! & 0xff}`
    }
  }
  if (bits === false) return formatIpv6(g)
  const whole = bits >>> 4
  const rest = bits & 15
  if (rest !== 0) g[whole]! &= (0xffff << (16 - rest)) & 0xffff
  for (let k = rest === 0 ? whole : whole + 1; k < 8; k++) g[k] = 0
  return `${formatIpv6(g)}/${bits}`
}

function isSpace(c: number): boolean {
  return (
    c <= 0x20 || c === 0xa0 || c === 0xfeff || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029
  )
}

/** A short, log-safe rendering of a received value (client text is quoted, escaped and truncated). */
function describe(value: unknown): string {
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value)
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value)
  return typeof value
}

/**
 * The client address behind `hops` trusted proxies, for runtimes without a trust-proxy setting of their
 * own (Hono): the socket address when `hops` is 0, the socket is unknown, or no `X-Forwarded-For` came;
 * otherwise the entry `hops` from the right (the leftmost when there are fewer entries). Raw text: pass
 * it to {@link canonicalIp}.
 *
 * @example
 * forwardedAddress('10.0.0.2', '203.0.113.9, 10.0.0.1', 1) // '10.0.0.1'
 * forwardedAddress('10.0.0.2', '203.0.113.9, 10.0.0.1', 2) // '203.0.113.9'
 */
export function forwardedAddress(
  socket: string | undefined,
  xForwardedFor: string | null | undefined,
  hops: number,
): string | undefined {
  if (hops === 0 || socket === undefined || !xForwardedFor) return socket
  const entries = xForwardedFor.split(',')
  return entries[Math.max(0, entries.length - hops)]!.trim() // hops > 0, so within the entries
}
