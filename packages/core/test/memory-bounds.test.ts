/**
 * The in-process structures are bounded by bytes, whatever the identities look like: 8 KiB and 32 KiB
 * identities fill the deny cache (refusals from the jest Redis) and the local fallback (an outage), and
 * thousands of store scopes (one per identity, as a cluster store names a primary per call) fill the
 * breakers the limiter keeps per scope. Each run is a process of its own with `--expose-gc` (fixtures/memory-probe.ts), which reports the heap growth
 * and what the structure itself retains (the heap freed by clearing it).
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { findRepoRoot, redisUrl } from '@tollgate/testkit'

const PROBE = join(__dirname, 'fixtures/memory-probe.ts')
const BUDGET = 4 * 1024 * 1024 // the default denyCache.maxBytes and localCapacity.maxBytes
const IDENTITIES = 12_000 // past both default caps (10,000 entries)

interface Probe {
  heapDelta: number
  retained: number
  entries: number
  accountedBytes: number
  maxBytes: number
  /** Calls the failure policy answered (the breakers probe expects none: every call reached Redis). */
  fallbacks: number
}

async function probe(env: Record<string, string>): Promise<Probe> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--import', 'tsx', PROBE], {
    cwd: findRepoRoot(),
    env: { ...process.env, REDIS_URL: redisUrl(), PROBE_IDENTITIES: String(IDENTITIES), ...env },
    timeout: 120_000,
  })
  return JSON.parse(stdout.trim().split('\n').pop()!)
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(2)} MiB`

describe('memory is bounded by bytes', () => {
  it.each([
    ['deny cache, default options', 'deny-cache', 8192, {}],
    ['deny cache, default options', 'deny-cache', 32768, {}],
    [
      'deny cache filled to its cap (maxMs: Infinity)',
      'deny-cache',
      32768,
      { PROBE_DENY_MAX_MS: 'Infinity' },
    ],
    ["'local' fallback during an outage", 'local', 32768, {}],
  ] as const)(
    '%s (%s, %d-byte identities)',
    async (label, mode, bytes, extra) => {
      const r = await probe({ PROBE_MODE: mode, PROBE_IDENTITY_BYTES: String(bytes), ...extra })
      console.log(
        `[memory] ${label}, ${bytes}-byte identities x ${IDENTITIES}: heap +${mib(r.heapDelta)}, ` +
          `structure retains ${mib(r.retained)} in ${r.entries} entries, accounted ${mib(r.accountedBytes)} of ${mib(r.maxBytes)}`,
      )
      expect(r.maxBytes).toBe(BUDGET)
      expect(r.accountedBytes).toBeLessThanOrEqual(r.maxBytes)
      // The accounting errs high: what the structure really holds is within it.
      expect(r.retained).toBeLessThanOrEqual(r.accountedBytes)
      // The rest of the growth is the client's buffers and the runtime's, not per identity.
      expect(r.heapDelta).toBeLessThan(2 * BUDGET)
    },
    180_000,
  )
})

// Issue 9 item 11, the third structure: one circuit breaker per store scope (a cluster primary). A store
// over the jest Redis names a scope per identity (fixtures/memory-probe.ts, 'breakers'), so 12,000
// identities bring 12,000 scopes; the limiter keeps at most 1,024 breakers and 512 KiB of them
// (limiter/breaker.ts, BreakerScopes), the oldest going first. An unbounded map would hold all 12,000.
describe('breakers per store scope are bounded by entries and bytes', () => {
  const MAX_SCOPES = 1024
  const MAX_SCOPE_BYTES = 512 * 1024
  it.each([
    ['64-byte scope names: the entry cap binds', 64],
    ['2 KiB scope names: the byte cap binds', 2048],
  ] as const)(
    '%s',
    async (_label, scopeBytes) => {
      const r = await probe({
        PROBE_MODE: 'breakers',
        PROBE_IDENTITY_BYTES: '16',
        PROBE_SCOPE_BYTES: String(scopeBytes),
      })
      console.log(
        `[memory] breakers per scope, ${scopeBytes}-byte scope names x ${IDENTITIES} scopes: heap ${r.heapDelta < 0 ? '' : '+'}${mib(r.heapDelta)}, ` +
          `map retains ${mib(r.retained)} in ${r.entries} breakers, accounted ${mib(r.accountedBytes)} of ${mib(r.maxBytes)}`,
      )
      expect(r.fallbacks).toBe(0) // every call was decided by Redis, through the breaker of its scope
      expect(r.maxBytes).toBe(MAX_SCOPE_BYTES)
      expect(r.entries).toBeLessThanOrEqual(MAX_SCOPES)
      expect(r.accountedBytes).toBeLessThanOrEqual(r.maxBytes)
      expect(r.retained).toBeLessThanOrEqual(r.accountedBytes)
      // 12,000 scopes leave no more than the bounded map behind (measured once the deadline queue drained),
      // plus a MiB for the client's buffers and the runtime's, which grow with the machine's load; an
      // unbounded map would hold about 12 times the entry cap's
      expect(r.heapDelta).toBeLessThan(MAX_SCOPE_BYTES + 1024 * 1024)
      // Not vacuous: the cap that binds was reached.
      if (scopeBytes === 64) expect(r.entries).toBe(MAX_SCOPES)
      else expect(r.accountedBytes).toBeGreaterThan(MAX_SCOPE_BYTES - (320 + 2 * scopeBytes))
    },
    180_000,
  )
})
