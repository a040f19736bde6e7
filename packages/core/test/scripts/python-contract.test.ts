/**
 * The script contract from another language (docs/scripts.md): a Python worker (examples/python-worker,
 * redis-py) loads the complete scripts the package publishes in `lua/`, builds the keys itself, and
 * shares one budget with Node's RateLimiter exactly: same keys, same SHA1s, same counts, refunds at most
 * once, reset for both. `.ci/run` installs Debian's python3-redis when it is missing; elsewhere, without
 * it, the cross-language tests are skipped with a warning, and fail under `CI=true`.
 */
import { execFile, execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { at, clearOfBoundary, redisUrl } from '@tollgate/testkit'
import { ALL_ALGORITHMS, uniquePrefix } from '@tollgate/testkit/store-suite'
import { type Algorithm, type KeyInput, RateLimiter, RedisStore } from '../../src'
import { buildKey, keySignature } from '../../src/entries/scripts'
import * as scripts from '../../src/scripts/generated'
import { nodeRedis } from '../clients'

const run = promisify(execFile)
const LUA = join(__dirname, '../../lua')
const WORKER = join(__dirname, '../../../../examples/python-worker/tollgate.py')
const DAY_MS = 86_400_000

/**
 * The first Python 3 that can import redis-py (Debian's python3-redis lives under /usr/bin/python3), or
 * undefined outside CI, as a missing runtime is: a run that never had Python must not pass for one that did.
 */
const python = (() => {
  for (const candidate of ['/usr/bin/python3', 'python3']) {
    try {
      execFileSync(candidate, ['-c', 'import redis'], { stdio: 'ignore' })
      return candidate
    } catch {}
  }
  const missing = 'no python3 with redis-py (apt-get install -y python3-redis; .ci/run does it)'
  if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(`${missing} (CI=true)`)
  console.warn(`[python-contract] ${missing}: the Python worker's tests are skipped`)
  return undefined
})()
const withPython = python ? describe : describe.skip

interface PyPolicy {
  name?: string
  algorithm: Algorithm
  limit: number
  window_ms: number
  burst?: number
}
type PyOp = 'consume' | 'peek' | 'reset' | ['refund', number, number, string?]
interface PyResult {
  keys: string[]
  sha1: Record<string, string>
  results: { op: string; allowed?: boolean; existed?: number; policies?: { remaining: number }[] }[]
}

async function py(spec: {
  prefix: string
  policies: PyPolicy[]
  identity: string | Record<string, string>
  ops: PyOp[]
  cost?: number
}): Promise<PyResult> {
  const { stdout } = await run(python!, [WORKER, JSON.stringify({ url: redisUrl(), ...spec })])
  return JSON.parse(stdout)
}

const admitted = (r: PyResult) => r.results.filter((x) => x.allowed === true).length

/** Node's side: 5 a day, one inline policy (keys without a policy name), as Python's `Policy(None, …)`. */
const nodeLimiter = (prefix: string, algorithm: Algorithm, denyCache?: false) =>
  new RateLimiter({ store: new RedisStore(client), prefix, limit: 5, window: DAY_MS, algorithm, denyCache })

let client: Awaited<ReturnType<typeof nodeRedis>>
beforeAll(async () => {
  // lua/*.lua are build output (the core package's prepack writes them): write them as published.
  execFileSync(process.execPath, [
    join(__dirname, '../../../../scripts/gen-lua.mjs'),
    '--published',
    '--quiet',
  ])
  client = await nodeRedis()
})
afterAll(async () => {
  await client.quit()
})
// Aligned windows restart at the epoch's day boundary: never let a test straddle one.
beforeEach(() => clearOfBoundary(DAY_MS, 30_000))

describe('the published lua/ scripts', () => {
  it.each([
    ['consume', scripts.CONSUME],
    ['peek', scripts.PEEK],
    ['refund', scripts.REFUND],
    ['reset', scripts.RESET],
    ['batch', scripts.BATCH],
  ])('%s.lua is complete and byte for byte the script Node sends (same SHA1)', (name, script) => {
    const text = readFileSync(join(LUA, `${name}.lua`), 'utf8')
    expect(text).not.toContain('@include')
    expect(text).toBe(script.source)
    expect(createHash('sha1').update(text).digest('hex')).toBe(script.sha1)
  })
})

withPython('a Python worker and Node share one budget', () => {
  it.each(ALL_ALGORITHMS)('%s: counts, refund at most once, reset', async (algorithm) => {
    const prefix = uniquePrefix(`py-${algorithm}`)
    const identity = 'user:42'
    // No deny cache: a reset sent from Python cannot clear a Node process's cached refusal (docs/scripts.md).
    const node = nodeLimiter(prefix, algorithm, false)
    const policies: PyPolicy[] = [{ algorithm, limit: 5, window_ms: DAY_MS }]
    for (let i = 0; i < 2; i++) expect((await node.consume(identity)).allowed).toBe(true)

    const first = await py({
      prefix,
      policies,
      identity,
      ops: ['consume', 'consume', 'consume', 'consume', 'consume'],
    })
    expect(first.keys).toEqual([buildKey(prefix, identity, keySignature(algorithm, DAY_MS))])
    expect(first.sha1.consume).toBe(scripts.CONSUME.sha1)
    expect(first.results.map((r) => r.allowed)).toEqual([true, true, true, false, false])
    expect((await node.consume(identity)).allowed).toBe(false)
    expect((await node.peek(identity)).remaining).toBe(0)

    // Python refunds its own spend twice under one spend id: one unit comes back, not two (a second
    // refund would hand back one of Node's spends).
    await node.reset(identity)
    for (let i = 0; i < 2; i++) await node.consume(identity)
    const refunds = await py({
      prefix,
      policies,
      identity,
      ops: ['consume', ['refund', 0, 1, 'spend-1'], ['refund', 0, 1, 'spend-1'], 'peek'],
    })
    expect(at(refunds.results, 0).allowed).toBe(true)
    expect(at(refunds.results, 3).policies?.[0]?.remaining).toBe(3)
    expect((await node.peek(identity)).remaining).toBe(3)

    // Node spends, Python resets, Node starts over.
    for (let i = 0; i < 5; i++) await node.consume(identity)
    expect((await node.peek(identity)).remaining).toBe(0)
    const reset = await py({ prefix, policies, identity, ops: ['reset', 'peek'] })
    expect(at(reset.results, 0).existed).toBe(1)
    expect(at(reset.results, 1).policies?.[0]?.remaining).toBe(5)
    expect((await node.consume(identity)).remaining).toBe(4)
  })

  it('two policies, hostile and long identities: the same keys, the binding limit across languages', async () => {
    const prefix = uniquePrefix('py-multi')
    const identities = [
      { ip: 'ip:203.0.113.9', account: 'email:victim@example.com' },
      { ip: 'ip:2001:db8::1', account: `email:${'x'.repeat(200)}@example.com` }, // hashed: over 128 bytes
      { ip: 'a}{b', account: '~h:forged' }, // hashed: braces, and the hashed-form marker
      { ip: 'ip:ünïcødé', account: 'tenant:\u00e9\u0301' }, // verbatim UTF-8 under 128 bytes
    ]
    const node = new RateLimiter({
      store: new RedisStore(client),
      prefix,
      policies: {
        ip: { limit: 5, window: DAY_MS, algorithm: 'sliding-window' },
        account: { limit: 3, window: DAY_MS, algorithm: 'gcra' },
      },
    })
    for (const identity of identities) {
      expect((await node.consume(identity as KeyInput)).allowed).toBe(true)
      const r = await py({
        prefix,
        policies: [
          { name: 'ip', algorithm: 'sliding-window', limit: 5, window_ms: DAY_MS },
          { name: 'account', algorithm: 'gcra', limit: 3, window_ms: DAY_MS },
        ],
        identity,
        ops: ['consume', 'consume', 'consume', 'peek'],
      })
      expect(r.keys).toEqual([
        buildKey(prefix, identity.ip, 'sw-1d', 'ip'),
        buildKey(prefix, identity.account, 'gc-1d', 'account'),
      ])
      // account (3) binds: Node took 1, Python gets 2, then nothing for either
      expect(r.results.slice(0, 3).map((x) => x.allowed)).toEqual([true, true, false])
      expect(at(r.results, 3).policies?.map((p) => p.remaining)).toEqual([2, 0])
      const d = await node.consume(identity as KeyInput)
      expect(d.allowed).toBe(false)
      expect(d.policies.map((p) => p.remaining)).toEqual([2, 0])
    }
  })

  it.each(ALL_ALGORITHMS)('%s: Python and Node at once admit exactly the limit', async (algorithm) => {
    const prefix = uniquePrefix(`py-race-${algorithm}`)
    const node = nodeLimiter(prefix, algorithm)
    const python = py({
      prefix,
      policies: [{ algorithm, limit: 5, window_ms: DAY_MS }],
      identity: 'hot',
      ops: new Array(30).fill('consume'),
    })
    const fromNode = (async () => {
      let n = 0
      for (let i = 0; i < 3; i++) {
        const batch = await Promise.all(Array.from({ length: 10 }, () => node.consume('hot')))
        n += batch.filter((d) => d.allowed).length
      }
      return n
    })()
    const [p, n] = await Promise.all([python, fromNode])
    expect(admitted(p) + n).toBe(5)
  })
})
