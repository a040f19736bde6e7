import { at } from '@tollgate/testkit/checked'
import fc from 'fast-check'
import ipaddr from 'ipaddr.js'
import {
  canonicalIp,
  DEFAULT_IPV6_SUBNET,
  formatIpv6,
  forwardedAddress,
  isIp,
  parseIpv6,
  resolveIpv6Subnet,
} from './ip'

describe('canonicalIp: IPv4', () => {
  it('keeps a plain dotted quad as is', () => {
    expect(canonicalIp('1.2.3.4')).toBe('1.2.3.4')
    expect(canonicalIp('0.0.0.0')).toBe('0.0.0.0')
    expect(canonicalIp('255.255.255.255')).toBe('255.255.255.255')
    expect(canonicalIp('10.0.100.9')).toBe('10.0.100.9')
  })

  it.each([
    '1.2.3.4',
    ' 1.2.3.4 ',
    '\t1.2.3.4\n',
    '1.2.3.4:8080',
    '1.2.3.4:0',
    '1.2.3.4:65535',
    '::ffff:1.2.3.4',
    '::FFFF:1.2.3.4',
    '::ffff:102:304',
    '::FFFF:0102:0304',
    '::ffff:0102:304',
    '0:0:0:0:0:ffff:0102:0304',
    '0000:0000:0000:0000:0000:FFFF:1.2.3.4',
    '0:0:0::ffff:1.2.3.4',
    '::0:ffff:102:304',
    '[::ffff:1.2.3.4]',
    '[::ffff:102:304]:443',
    '[::ffff:1.2.3.4%eth0]:443',
    '::ffff:1.2.3.4%eth0',
    '64:ff9b::1.2.3.4',
    '64:FF9B::102:304',
    '[0064:ff9b:0:0:0:0:0102:0304]:80',
  ])('reads %j as 1.2.3.4', (spelling) => {
    expect(canonicalIp(spelling)).toBe('1.2.3.4')
  })

  it('never masks IPv4, whatever ipv6Subnet says', () => {
    expect(canonicalIp('::ffff:203.0.113.77', { ipv6Subnet: 32 })).toBe('203.0.113.77')
    expect(canonicalIp('203.0.113.77', { ipv6Subnet: false })).toBe('203.0.113.77')
  })

  it('gives distinct IPv4-mapped clients distinct keys (CVE-2026-30827: not all ::/56)', () => {
    expect(canonicalIp('::ffff:1.2.3.4')).not.toBe(canonicalIp('::ffff:5.6.7.8'))
    expect(canonicalIp('::ffff:102:304')).not.toBe(canonicalIp('::ffff:506:708'))
  })

  it('keeps other embedded-IPv4 forms IPv6 (#667: the sender picks the low 32 bits)', () => {
    expect(canonicalIp('2001:db8::1.2.3.4')).not.toBe('1.2.3.4')
    expect(canonicalIp('2001:db8::1.2.3.4')).toBe('2001:db8::/56')
    expect(canonicalIp('2001:db8::1.2.3.4', { ipv6Subnet: false })).toBe('2001:db8::102:304')
    // Deprecated IPv4-compatible form, and a NAT64 local-use prefix (not the well-known one).
    expect(canonicalIp('::1.2.3.4', { ipv6Subnet: false })).toBe('::102:304')
    expect(canonicalIp('::1.2.3.4')).not.toBe('1.2.3.4')
    expect(canonicalIp('64:ff9b:1::1.2.3.4', { ipv6Subnet: false })).toBe('64:ff9b:1::102:304')
    // ::ffff:0:a.b.c.d (IPv4-translated) is not the mapped range either.
    expect(canonicalIp('::ffff:0:1.2.3.4', { ipv6Subnet: false })).toBe('::ffff:0:102:304')
  })
})

describe('canonicalIp: IPv6', () => {
  const spellings = [
    '2001:db8:0:12ab::1',
    '2001:DB8:0:12AB::1',
    '2001:0db8:0000:12ab:0000:0000:0000:0001',
    '2001:db8:0:12ab:0:0:0:1',
    '2001:db8::12ab:0:0:0:1',
    '2001:db8:0:12ab::0.0.0.1',
    '[2001:db8:0:12ab::1]',
    '[2001:db8:0:12ab::1]:443',
    '2001:db8:0:12ab::1%eth0',
    '[2001:db8:0:12ab::1%25eth0]:8443',
    '  2001:db8:0:12ab::1  ',
  ]

  it.each(spellings)('masks %j to its /56 by default', (spelling) => {
    expect(canonicalIp(spelling)).toBe('2001:db8:0:1200::/56')
  })

  it.each(spellings)('prints %j in RFC 5952 form with ipv6Subnet: false', (spelling) => {
    expect(canonicalIp(spelling, { ipv6Subnet: false })).toBe('2001:db8:0:12ab::1')
  })

  it('groups 20 addresses of one /56 and separates the next /56', () => {
    const keys = new Set<string>()
    for (let i = 0; i < 20; i++) {
      // Vary the last 8 bits of the 4th group and the whole interface id.
      const g4 = (0x1200 + i * 12).toString(16)
      keys.add(canonicalIp(`2001:db8:0:${g4}:${((i * 7919) & 0xffff).toString(16)}::${i.toString(16)}`))
    }
    expect([...keys]).toEqual(['2001:db8:0:1200::/56'])
    expect(canonicalIp('2001:db8:0:1300::1')).toBe('2001:db8:0:1300::/56')
    expect(canonicalIp('2001:db8:0:11ff:ffff:ffff:ffff:ffff')).toBe('2001:db8:0:1100::/56')
  })

  it('masks to any prefix from 32 to 128', () => {
    const a = '2001:db8:abcd:ef12:3456:789a:bcde:f012'
    expect(canonicalIp(a, { ipv6Subnet: 32 })).toBe('2001:db8::/32')
    expect(canonicalIp(a, { ipv6Subnet: 48 })).toBe('2001:db8:abcd::/48')
    expect(canonicalIp(a, { ipv6Subnet: 57 })).toBe('2001:db8:abcd:ef00::/57')
    expect(canonicalIp(a, { ipv6Subnet: 60 })).toBe('2001:db8:abcd:ef10::/60')
    expect(canonicalIp(a, { ipv6Subnet: 64 })).toBe('2001:db8:abcd:ef12::/64')
    expect(canonicalIp(a, { ipv6Subnet: 127 })).toBe('2001:db8:abcd:ef12:3456:789a:bcde:f012/127')
    expect(canonicalIp('2001:db8::f013', { ipv6Subnet: 127 })).toBe('2001:db8::f012/127')
    expect(canonicalIp(a, { ipv6Subnet: 128 })).toBe(a)
    expect(canonicalIp(a, { ipv6Subnet: false })).toBe(a)
  })

  it('never gives a masked network the key of a host address', () => {
    expect(canonicalIp('2001:db8::', { ipv6Subnet: false })).toBe('2001:db8::')
    expect(canonicalIp('2001:db8::1')).toBe('2001:db8::/56')
    expect(canonicalIp('2001:db8::1')).not.toBe(canonicalIp('2001:db8::', { ipv6Subnet: false }))
  })

  it('strips zone ids', () => {
    expect(canonicalIp('fe80::1%eth0', { ipv6Subnet: false })).toBe('fe80::1')
    expect(canonicalIp('fe80::1%1', { ipv6Subnet: false })).toBe('fe80::1')
    expect(canonicalIp('[fe80::1%25en0]:80', { ipv6Subnet: false })).toBe('fe80::1')
  })

  it.each([
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // first of two equal runs
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'], // the longest run
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group stays
    ['0:0:0:0:0:0:0:0', '::'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['1:0:0:0:0:0:0:0', '1::'],
    ['::1:2:3:4:5:6:7', '0:1:2:3:4:5:6:7'], // '::' for one group is accepted, but not printed
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['ABCD:EF01:2345:6789:ABCD:EF01:2345:6789', 'abcd:ef01:2345:6789:abcd:ef01:2345:6789'],
    ['2001:db8::0:1', '2001:db8::1'],
  ])('prints %j as %j (RFC 5952)', (input, expected) => {
    expect(canonicalIp(input, { ipv6Subnet: false })).toBe(expected)
  })
})

describe('canonicalIp: rejects what is not an address', () => {
  it.each([
    '',
    '   ',
    'abc',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '1.2.3.256',
    '1.2.3.-4',
    '1.2.3.4 5',
    '1..2.3',
    '.1.2.3.4',
    '1.2.3.4.',
    '01.2.3.4', // leading zero: octal to inet_aton, decimal to others; ambiguous, so refused
    '1.2.3.010',
    '0x1.2.3.4',
    '1.2.3.4:',
    '1.2.3.4:65536',
    '1.2.3.4:123456',
    '1.2.3.4:8o',
    '1.2.3.4%eth0',
    '::ffff:1.2.3',
    '::ffff:1.2.3.256',
    '::ffff:01.2.3.4',
    '::ffff:1.2.3.4:80', // an unbracketed port after a dotted tail
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7::8',
    '1:2:3:4:5:6::1.2.3.4',
    '1.2.3.4::',
    ':::',
    ':',
    '::1::',
    '1::2::3',
    ':1::2',
    '1::2:',
    '1:2:3:4:5:6:7:8:',
    '12345::1',
    'g::1',
    '::ffff:1.2.3.4.5',
    '[::1',
    '[::1]x',
    '[::1]:',
    '[::1]:99999',
    '[1.2.3.4]',
    '[]',
    'fe80::1%',
    '[fe80::1%]',
    'localhost',
    '1.2.3.4\u0000',
    `${'1'.repeat(200)}`,
  ])('throws a TypeError for %j', (input) => {
    expect(() => canonicalIp(input)).toThrow(TypeError)
    expect(isIp(input)).toBe(false)
  })

  it('names the bad input, quoted and truncated, in the message', () => {
    expect(() => canonicalIp('1.2.3')).toThrow(
      'client IP address "1.2.3" is not a valid IPv4 or IPv6 address',
    )
    expect(() => canonicalIp(`x\r\n${'y'.repeat(100)}`)).toThrow(/"x\\r\\ny{61}…"/)
  })

  it('throws for a missing address instead of keying every such client together', () => {
    expect(() => canonicalIp(undefined)).toThrow(
      new TypeError('client IP address is missing (received undefined)'),
    )
    expect(() => canonicalIp(null)).toThrow(TypeError)
    expect(() => canonicalIp(42 as unknown as string)).toThrow(TypeError)
  })

  it('never returns an empty key, for any input', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (s) => {
        let key: string
        try {
          key = canonicalIp(s)
        } catch (err) {
          return err instanceof TypeError
        }
        return key.length > 0 && isIp(s)
      }),
      { numRuns: 2000 },
    )
  })
})

describe('ipv6Subnet validation', () => {
  it.each([31, 129, 0, -56, 56.5, Number.NaN, Number.POSITIVE_INFINITY, '56', true, null, {}])(
    'rejects %p with a RangeError naming ipv6Subnet',
    (value) => {
      expect(() => canonicalIp('1.2.3.4', { ipv6Subnet: value as number })).toThrow(RangeError)
      expect(() => resolveIpv6Subnet(value)).toThrow(
        /^ipv6Subnet must be an integer from 32 to 128 or false, received/,
      )
    },
  )

  it('puts the value in the message', () => {
    expect(() => resolveIpv6Subnet(20)).toThrow(
      new RangeError('ipv6Subnet must be an integer from 32 to 128 or false, received 20'),
    )
    expect(() => resolveIpv6Subnet('64')).toThrow(/received "64"$/)
  })

  it('accepts 32..128 and false; 128 means no masking', () => {
    expect(resolveIpv6Subnet(undefined)).toBe(DEFAULT_IPV6_SUBNET)
    expect(DEFAULT_IPV6_SUBNET).toBe(56)
    expect(resolveIpv6Subnet(32)).toBe(32)
    expect(resolveIpv6Subnet(64)).toBe(64)
    expect(resolveIpv6Subnet(128)).toBe(false)
    expect(resolveIpv6Subnet(false)).toBe(false)
    expect(canonicalIp('::1', { ipv6Subnet: undefined })).toBe('::/56')
  })

  it('validates the option before looking at the address', () => {
    expect(() => canonicalIp(undefined, { ipv6Subnet: 8 })).toThrow(RangeError)
  })
})

describe('helpers', () => {
  it('parseIpv6 returns eight groups or undefined', () => {
    expect([...(parseIpv6('2001:db8::1.2.3.4') ?? [])]).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0x102, 0x304])
    expect([...(parseIpv6('::') ?? [])]).toEqual([0, 0, 0, 0, 0, 0, 0, 0])
    expect(parseIpv6('1.2.3.4')).toBeUndefined()
    expect(parseIpv6('[::1]')).toBeUndefined()
    // A fresh array each time: callers may keep it.
    const a = parseIpv6('::1')
    parseIpv6('::2')
    expect(a?.[7]).toBe(1)
  })

  it('formatIpv6 prints RFC 5952', () => {
    expect(formatIpv6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1])).toBe('2001:db8::1:0:0:1')
    expect(formatIpv6([0, 0, 0, 0, 0, 0, 0, 0])).toBe('::')
  })

  it('isIp accepts every spelling canonicalIp accepts', () => {
    expect(isIp('[::1]:80')).toBe(true)
    expect(isIp('1.2.3.4:80')).toBe(true)
    expect(isIp('fe80::1%eth0')).toBe(true)
    expect(isIp(undefined)).toBe(false)
  })
})

/** Every textual spelling of one IPv6 address that canonicalIp must accept. */
const group = fc.oneof(
  { weight: 3, arbitrary: fc.constant(0) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) },
)
const groupsArb = fc.array(group, { minLength: 8, maxLength: 8 })

interface Spelling {
  upper: boolean[]
  pad: number[]
  compress: number // index into the zero runs, or -1
  dotted: boolean
  wrap: 'none' | 'brackets' | 'port' | 'zone' | 'zone-port'
  port: number
}

const spellingArb: fc.Arbitrary<Spelling> = fc.record({
  upper: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  pad: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 8, maxLength: 8 }),
  compress: fc.integer({ min: -1, max: 7 }),
  dotted: fc.boolean(),
  wrap: fc.constantFrom('none', 'brackets', 'port', 'zone', 'zone-port'),
  port: fc.integer({ min: 0, max: 65535 }),
})

function spell(g: number[], s: Spelling): string {
  const hex = (i: number): string => {
    const h = at(g, i).toString(16)
    const padded = '0'.repeat(Math.max(0, Math.min(4, h.length + at(s.pad, i)) - h.length)) + h
    return s.upper[i] ? padded.toUpperCase() : padded
  }
  const dotted = s.dotted
  const count = dotted ? 6 : 8
  const parts: string[] = []
  for (let i = 0; i < count; i++) parts.push(hex(i))
  const tail = dotted ? `${at(g, 6) >> 8}.${at(g, 6) & 255}.${at(g, 7) >> 8}.${at(g, 7) & 255}` : ''
  // Zero runs among the hex groups; pick one (any length >= 1) to write as '::'.
  const runs: Array<[number, number]> = []
  for (let i = 0; i < count; ) {
    if (g[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < count && g[j] === 0) j++
    runs.push([i, j])
    i = j
  }
  let text: string
  if (s.compress >= 0 && runs.length > 0) {
    const [a, b] = at(runs, s.compress % runs.length)
    const head = parts.slice(0, a).join(':')
    const rest = [...parts.slice(b), ...(dotted ? [tail] : [])].join(':')
    text = `${head}::${rest}`
  } else {
    text = [...parts, ...(dotted ? [tail] : [])].join(':')
  }
  switch (s.wrap) {
    case 'brackets':
      return `[${text}]`
    case 'port':
      return `[${text}]:${s.port}`
    case 'zone':
      return `${text}%eth0`
    case 'zone-port':
      return `[${text}%25eth0]:${s.port}`
    default:
      return text
  }
}

describe('property: one address, one key', () => {
  it('every spelling of an IPv6 address gives the same key, masked or not', () => {
    fc.assert(
      fc.property(
        groupsArb,
        spellingArb,
        spellingArb,
        fc.constantFrom<number | false>(false, 32, 48, 56, 57, 64, 100, 128),
        (g, s1, s2, ipv6Subnet) => {
          const a = canonicalIp(spell(g, s1), { ipv6Subnet })
          const b = canonicalIp(spell(g, s2), { ipv6Subnet })
          expect(a).toBe(b)
          expect(canonicalIp(formatIpv6(g), { ipv6Subnet })).toBe(a)
        },
      ),
      { numRuns: 3000 },
    )
  })

  it('the unmasked key is the RFC 5952 text, or the IPv4 client of a mapped / NAT64 address', () => {
    fc.assert(
      fc.property(groupsArb, spellingArb, (g, s) => {
        const key = canonicalIp(spell(g, s), { ipv6Subnet: false })
        const mapped = g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff
        const nat64 = g[0] === 0x64 && g[1] === 0xff9b && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0
        if (mapped || nat64)
          expect(key).toBe(`${at(g, 6) >> 8}.${at(g, 6) & 255}.${at(g, 7) >> 8}.${at(g, 7) & 255}`)
        else expect(key).toBe(formatIpv6(g))
        // A key is itself an address in canonical form: reading it again changes nothing.
        expect(canonicalIp(key, { ipv6Subnet: false })).toBe(key)
      }),
      { numRuns: 3000 },
    )
  })

  it('every mapped spelling of an IPv4 address gives that address', () => {
    const octet = fc.integer({ min: 0, max: 255 })
    fc.assert(
      fc.property(octet, octet, octet, octet, spellingArb, (a, b, c, d, s) => {
        const g = [0, 0, 0, 0, 0, 0xffff, (a << 8) | b, (c << 8) | d]
        expect(canonicalIp(spell(g, s))).toBe(`${a}.${b}.${c}.${d}`)
      }),
      { numRuns: 2000 },
    )
  })

  it('addresses of different /56 networks never share a key', () => {
    fc.assert(
      fc.property(groupsArb, groupsArb, (g1, g2) => {
        const net = (g: number[]) => `${g[0]}:${g[1]}:${g[2]}:${at(g, 3) >> 8}`
        fc.pre(net(g1) !== net(g2))
        const isV4 = (g: number[]) =>
          g[2] === 0 &&
          g[3] === 0 &&
          g[4] === 0 &&
          ((g[0] === 0 && g[1] === 0 && g[5] === 0xffff) || (g[0] === 0x64 && g[1] === 0xff9b && g[5] === 0))
        fc.pre(!isV4(g1) && !isV4(g2))
        expect(canonicalIp(formatIpv6(g1))).not.toBe(canonicalIp(formatIpv6(g2)))
      }),
      { numRuns: 2000 },
    )
  })
})

describe('forwardedAddress', () => {
  const xff = '203.0.113.9, 198.51.100.7 , 10.0.0.1'
  it.each([
    [0, '10.0.0.2'], // no trusted proxy: the socket, whatever the header says
    [1, '10.0.0.1'],
    [2, '198.51.100.7'],
    [3, '203.0.113.9'],
    [9, '203.0.113.9'], // fewer entries than hops: the leftmost
  ])('with %i trusted hops', (hops, expected) => {
    expect(forwardedAddress('10.0.0.2', xff, hops)).toBe(expected)
  })
  it('falls back to the socket without a header, and passes an unknown socket through', () => {
    expect(forwardedAddress('10.0.0.2', undefined, 2)).toBe('10.0.0.2')
    expect(forwardedAddress('10.0.0.2', '', 2)).toBe('10.0.0.2')
    expect(forwardedAddress(undefined, xff, 1)).toBeUndefined()
  })
})

/**
 * ipaddr.js (the parser Express's proxy-addr uses) as an oracle: every address fast-check spells, in
 * every IPv6 spelling it knows (compressed, embedded IPv4, upper case), gets the key ipaddr.js's numeric
 * reading gives, with only this module's documented policies on top (IPv4-mapped and NAT64 carry an
 * IPv4 client, IPv6 masked to the subnet).
 */
describe('canonicalIp agrees with ipaddr.js', () => {
  const oracle = (text: string, bits: number | false): string => {
    const ip = ipaddr.parse(text)
    if (ip.kind() === 'ipv4') return ip.toString()
    let v6 = ip as ipaddr.IPv6
    // ipaddr.js 2.5 reads the IPv4-compatible `::a.b.c.d` as `::ffff:a.b.c.d` (RFC 4291 §2.5.5.1 says
    // the groups before it are zero): the client chooses those 32 bits, so we must not (test below).
    if (/^::(\d+\.){3}\d+$/i.test(text))
      v6 = new ipaddr.IPv6([0, 0, 0, 0, 0, 0, at(v6.parts, 6), at(v6.parts, 7)])
    if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString()
    const p = v6.parts
    if (p[0] === 0x64 && p[1] === 0xff9b && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0) {
      return `${at(p, 6) >> 8}.${at(p, 6) & 0xff}.${at(p, 7) >> 8}.${at(p, 7) & 0xff}`
    }
    if (bits === false) return v6.toRFC5952String()
    const masked = p.map((g, i) => {
      const keep = Math.max(0, Math.min(16, bits - 16 * i))
      return keep === 0 ? 0 : g & (0xffff << (16 - keep)) & 0xffff
    })
    return `${new ipaddr.IPv6(masked).toRFC5952String()}/${bits}`
  }

  it('IPv4, every spelling of IPv6, several subnets', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.ipV4(),
          fc.ipV6(),
          fc.ipV6().map((s) => s.toUpperCase()),
        ),
        fc.constantFrom<number | false>(false, 56, 64, 48, 128, 33),
        (text, bits) => {
          expect(canonicalIp(text, { ipv6Subnet: bits })).toBe(oracle(text, bits === 128 ? false : bits))
        },
      ),
      { numRuns: 20_000 },
    )
  })

  it('where ipaddr.js is wrong: the IPv4-compatible `::a.b.c.d` is not the IPv4 client a.b.c.d', () => {
    expect(ipaddr.parse('::1.2.3.4').toNormalizedString()).toBe('0:0:0:0:0:ffff:102:304') // the quirk
    expect(canonicalIp('::1.2.3.4', { ipv6Subnet: false })).toBe('::102:304')
    expect(canonicalIp('::1.2.3.4')).not.toBe(canonicalIp('1.2.3.4'))
  })

  it('IPv4-mapped and NAT64 addresses in any spelling are their IPv4 client', () => {
    fc.assert(
      fc.property(
        fc.ipV4(),
        fc.constantFrom('::ffff:', '::FFFF:', '0:0:0:0:0:ffff:', '64:ff9b::'),
        (v4, pre) => {
          const hex = ipaddr.IPv6.parse(`::ffff:${v4}`).parts.slice(6)
          for (const text of [`${pre}${v4}`, `${pre}${at(hex, 0).toString(16)}:${at(hex, 1).toString(16)}`]) {
            expect(canonicalIp(text)).toBe(oracle(text, 56))
            expect(canonicalIp(text)).toBe(v4)
          }
        },
      ),
    )
  })
})
