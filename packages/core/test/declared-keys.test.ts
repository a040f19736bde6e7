/**
 * Every key a script touches is one of its KEYS (what Redis Cluster and every proxy rely on). MONITOR on
 * a server of this test's own shows each EVAL/EVALSHA followed by the commands its script ran; each of
 * those is checked against that call's KEYS, for every algorithm and every operation the store sends
 * (consume, peek, refund with its marker, release, reset, penalties, one and two policies), batched and
 * `batch: false`, with a key each and with `storage: 'compact'`, through node-redis and ioredis. A command
 * this file does not know fails the test: its key positions must be added to the table first.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { at, type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import { ALL_ALGORITHMS } from '@tollgate/testkit/store-suite'
import Redis from 'ioredis'
import { createClient } from 'redis'
import { type Decision, RateLimiter, type RateLimiterOptions, RedisStore } from '../src'

/** Where each command the scripts may send holds its keys: argument indexes, or 'all' from the first. */
const KEY_POSITIONS: Readonly<Record<string, readonly number[] | 'all'>> = {
  TIME: [],
  GET: [1],
  SET: [1],
  INCRBY: [1],
  PEXPIRETIME: [1],
  PEXPIRE: [1],
  PEXPIREAT: [1],
  PTTL: [1],
  ZADD: [1],
  ZCOUNT: [1],
  ZRANGE: [1],
  ZREM: [1],
  ZREMRANGEBYSCORE: [1],
  ZSCORE: [1],
  // top.lua (RateLimiter.top)
  ZINCRBY: [1],
  ZCARD: [1],
  ZREMRANGEBYRANK: [1],
  DEL: 'all',
  EXISTS: 'all',
  COPY: [1, 2],
  // storage: 'compact' (bucket hashes)
  HGET: [1],
  HSET: [1],
  HINCRBY: [1],
  HLEN: [1],
  HDEL: [1],
  HKEYS: [1],
  HGETALL: [1],
  HEXISTS: [1],
  // block and allow entries (control keys, the block index)
  HMGET: [1],
  HSCAN: [1],
}

/** The arguments of one MONITOR line (`<time> [<db> <source>] "arg" "arg" …`), and its source. */
function parseMonitorLine(line: string): { source: string; args: string[] } | undefined {
  const m = /^\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line)
  if (!m) return undefined
  const args: string[] = []
  const text = at(m, 2)
  let i = 0
  while (i < text.length) {
    if (text[i] !== '"') throw new Error(`unexpected MONITOR text: ${line}`)
    let arg = ''
    i++
    while (text[i] !== '"') {
      if (text[i] === '\\') {
        const c = at(text, i + 1)
        if (c === 'x') {
          arg += String.fromCharCode(Number.parseInt(text.slice(i + 2, i + 4), 16))
          i += 4
          continue
        }
        arg += ({ n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' } as Record<string, string>)[c] ?? c
        i += 2
        continue
      }
      arg += text[i++]
    }
    args.push(arg)
    i += 2 // the closing quote and the space
  }
  return { source: at(m, 1), args }
}

/** Each command a script ran that touches a key outside its call's KEYS, or that the table lacks. */
function undeclared(lines: readonly string[], ours: (keys: string[]) => boolean): string[] {
  const problems: string[] = []
  let keys: Set<string> | undefined
  let mine = false
  for (const line of lines) {
    const parsed = parseMonitorLine(line)
    if (!parsed) continue
    const { source, args } = parsed
    if (source !== 'lua') {
      const cmd = at(args, 0).toUpperCase()
      if (/^EVAL(SHA)?(_RO)?$/.test(cmd)) {
        const declared = args.slice(3, 3 + Number(args[2]))
        keys = new Set(declared)
        mine = ours(declared)
      } else {
        keys = undefined
        mine = false
      }
      continue
    }
    if (!mine) continue
    if (keys === undefined) {
      problems.push(`a script command outside a script: ${line}`)
      continue
    }
    const cmd = at(args, 0).toUpperCase()
    const positions = KEY_POSITIONS[cmd]
    if (positions === undefined) {
      problems.push(`a command the key table does not know: ${cmd}`)
      continue
    }
    const touched = positions === 'all' ? args.slice(1) : positions.map((p) => at(args, p))
    for (const key of touched)
      if (!keys.has(key)) problems.push(`${cmd} ${key} (KEYS: ${[...keys].join(' ')})`)
  }
  return problems
}

describe('the MONITOR checker', () => {
  it('finds an undeclared key, an unknown command, and accepts declared keys', () => {
    const lines = [
      '1.000001 [0 127.0.0.1:1] "evalsha" "abc" "1" "p:{k}:sw-1m" "1"',
      '1.000002 [0 lua] "TIME"',
      '1.000003 [0 lua] "GET" "p:{k}:sw-1m"',
      '1.000004 [0 lua] "GET" "p:{k}:sw-1m:default"',
      '1.000005 [0 lua] "HSTRLEN" "p:{k}:sw-1m" "w"',
      '1.000006 [0 127.0.0.1:1] "eval" "return 1" "2" "a \\"b\\"" "c\\x00d"',
      '1.000007 [0 lua] "DEL" "a \\"b\\"" "c\\x00d"',
      '1.000008 [0 lua] "DEL" "c\\x00d" "e"',
    ]
    expect(undeclared(lines, () => true)).toEqual([
      'GET p:{k}:sw-1m:default (KEYS: p:{k}:sw-1m)',
      'a command the key table does not know: HSTRLEN',
      'DEL e (KEYS: a "b" c\x00d)',
    ])
  })
})

type Kind = 'node-redis' | 'ioredis'

describe('every command inside a script touches only its declared keys', () => {
  let server: RedisServerHandle
  let monitor: ChildProcess
  let lines: string[] = []
  beforeAll(async () => {
    server = await startRedisServer()
    monitor = spawn('redis-cli', ['-p', String(server.port), 'monitor'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    let rest = ''
    monitor.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (rest + chunk).split('\n')
      rest = parts.pop()!
      lines.push(...parts)
    })
    // MONITOR is on once its own OK has been printed
    while (!lines.includes('OK')) await new Promise((r) => setTimeout(r, 10))
  })
  afterAll(async () => {
    monitor?.kill()
    await server?.stop()
  })

  /** Waits until MONITOR has shown everything sent before this call. */
  async function flushed(send: (marker: string) => Promise<unknown>): Promise<void> {
    const marker = `flushed-${Math.random()}`
    await send(marker)
    while (!lines.some((l) => l.includes(marker))) await new Promise((r) => setTimeout(r, 10))
  }

  const rate = (algorithm: (typeof ALL_ALGORITHMS)[number] | 'concurrency') =>
    algorithm === 'concurrency'
      ? ({ concurrency: 2, lease: '1m' } as const)
      : ({ limit: 2, window: '1m', algorithm } as const)

  /** Every operation of a limiter, on one identity and a second, concurrently (batched) and alone. */
  async function exercise(limiter: RateLimiter): Promise<void> {
    const ds: Decision[] = await Promise.all([1, 2, 3].map(() => limiter.consume('k'))) // a hot key
    ds.push(...(await Promise.all([limiter.consume('j'), limiter.consume('i', { cost: 2 })])))
    ds.push(await limiter.consume('k')) // refused (penalties count it)
    await Promise.all([limiter.peek('k'), limiter.peek('j', { cost: 2 })])
    await limiter.peek('h')
    await Promise.all(ds.map((d) => limiter.refund(d))) // refunds with their markers, batched
    await limiter.refund(at(ds, 0)) // the marker says: already given back
    if (limiter.leases) {
      await Promise.all(ds.map((d) => limiter.release(d)))
      await limiter.release(at(ds, 0))
    }
    await Promise.all([limiter.reset('k'), limiter.reset('j')])
    await limiter.reset('i')
  }

  it.each<[Kind, boolean, boolean]>([
    ['node-redis', true, false],
    ['node-redis', false, false],
    ['ioredis', true, false],
    ['ioredis', false, false],
    ['node-redis', true, true],
    ['ioredis', false, true],
  ])('%s, batched %s, compact storage %s', async (kind, batched, compact) => {
    lines = lines.slice(-1)
    let send: (marker: string) => Promise<unknown>
    let close: () => Promise<unknown>
    let store: RedisStore
    const options = {
      ...(batched ? {} : { batch: false as const }),
      ...(compact ? { storage: 'compact' as const, secret: 'declared-keys-secret' } : {}),
    }
    if (kind === 'node-redis') {
      const client = createClient({ url: server.url, RESP: 3 })
      client.on('error', () => {})
      await client.connect()
      store = new RedisStore(client, options)
      send = (m) => client.echo(m)
      close = () => client.quit()
    } else {
      const client = new Redis(server.url)
      await new Promise((r) => client.once('ready', r))
      store = new RedisStore(client, options)
      send = (m) => client.echo(m)
      close = () => client.quit()
    }
    const prefix = `mon-${kind}-${batched}-${compact}`
    for (const algorithm of [...ALL_ALGORITHMS, 'concurrency'] as const) {
      const build = (tag: string, o: Omit<RateLimiterOptions, 'store'>) =>
        new RateLimiter({
          ...o,
          store,
          prefix: `${prefix}-${algorithm}-${tag}`,
          denyCache: false,
        } as RateLimiterOptions)
      await exercise(build('one', rate(algorithm)))
      await exercise(
        build('two', {
          policies: {
            a: rate(algorithm),
            b: { limit: 1, window: '1h', algorithm: 'fixed-window', penalty: { block: '1s' } },
          },
        }),
      )
      if (algorithm !== 'concurrency') {
        await exercise(build('pen', { ...rate(algorithm), penalty: { after: 2, block: '1s' } }))
      }
    }
    await flushed(send)
    await close()
    const scripts = lines.filter((l) => /\] "evalsha?" /i.test(l)).length
    expect(scripts).toBeGreaterThan(100) // the store really ran its scripts here
    expect(lines.filter((l) => l.includes('[0 lua]')).length).toBeGreaterThan(scripts)
    expect(undeclared(lines, (keys) => keys.some((k) => k.startsWith(prefix)))).toEqual([])
  })
})
