/**
 * The core on a runtime without `process.getBuiltinModule` (Node before 20.16 / 22.3): no diagnostics
 * channel, the same decisions. A child process (fixtures/no-channels.ts) deletes the function before
 * loading the core and decides against the suite's redis-server; a control run keeps it.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { findRepoRoot, redisUrl } from '@tollgate/testkit'

const FIXTURE = join(__dirname, 'fixtures/no-channels.ts')

interface Run {
  getBuiltinModule: string
  channelsAvailable: boolean
  answers: Array<{
    allowed: boolean
    source: string
    remaining: number
    shadow: string[] | null
    pairs: number
  }>
  published: number
  events: string[]
}

async function run(noChannels: boolean): Promise<Run> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', FIXTURE], {
    cwd: findRepoRoot(),
    env: { ...process.env, REDIS_URL: redisUrl(), NO_CHANNELS: noChannels ? '1' : '0' },
    timeout: 60_000,
  })
  return JSON.parse(stdout.trim().split('\n').pop()!)
}

describe('a runtime without diagnostics_channel', () => {
  it('publishes nothing and decides exactly as with it, store, deny cache, shadow and failure policy', async () => {
    const without = await run(true)
    expect(without.getBuiltinModule).toBe('undefined')
    expect(without.channelsAvailable).toBe(false)
    expect(without.published).toBe(0)
    expect(without.answers.map((a) => [a.allowed, a.source, a.shadow])).toEqual([
      [true, 'store', null], // both policies admit
      [true, 'store', ['trial']], // only the shadow policy refuses: a pass
      [false, 'store', ['trial']], // the enforced policy refuses
      [false, 'cache', ['trial']], // the deny cache answers
      [false, 'store', ['trial']], // peek
      [true, 'store', null], // after reset
      [false, 'fallback', null], // a client that never connects, onStoreError 'deny'
    ])
    // The onEvent hook does not depend on the channels.
    expect(without.events).toEqual(['cache-hit', 'fallback', 'store-error'])

    // The control: the same calls on the real runtime publish every answer and decide the same.
    const withChannels = await run(false)
    expect(withChannels.getBuiltinModule).toBe('function')
    expect(withChannels.channelsAvailable).toBe(true)
    expect(withChannels.published).toBe(without.answers.length)
    expect(withChannels.answers).toEqual(without.answers)
    expect(withChannels.events).toEqual(without.events)
  })
})
