/**
 * What the script tests that compare two paths share: a connection that runs a script's source and reads
 * the server's time, the stored states a sliding- or fixed-window key can be in, and how to set and read
 * them back; a server of a test's own. The window lasts until 2065, so no window boundary falls during a test.
 */
import { startRedisServer } from '@tollgate/testkit'
import { createClient } from 'redis'
import type { Script } from '../../src/entries/scripts'
import { nodeRedis } from '../clients'

export const W = 1_500_000_000_000 // ms: the current window is [2017, 2065)
export const WID = 1
export const LIMIT = 5
export const M = 2 ** 27 // sliding-window.lua: q + 2 x curr + prev x 2^27, q = curr's window index mod 2

/** A key's state: a string with an expiry (ms, 0: none), a hash, or no key. */
export type State = { value: string; pxat: number } | { hash: true } | null

/** Every state a key of the sliding (2) or fixed (1) window is tried in, by name. */
export const states: Record<1 | 2, Record<string, State>> = {
  2: {
    none: null,
    'this window': { value: String((WID % 2) + 2 * 3 + 1 * M), pxat: (WID + 2) * W },
    'this window, full': { value: String((WID % 2) + 2 * LIMIT), pxat: (WID + 2) * W },
    'the previous window': { value: String(((WID - 1) % 2) + 2 * 4 + 2 * M), pxat: (WID + 1) * W },
    'the previous window, weighted full': { value: String(((WID - 1) % 2) + 2 * LIMIT), pxat: (WID + 1) * W },
    // q says the previous window, the expiry this one (state the scripts did not write): read by q
    'a q the expiry contradicts': { value: String(((WID - 1) % 2) + 2 * LIMIT), pxat: (WID + 2) * W },
    "INCRBY's refusal ('-0')": { value: '-0', pxat: (WID + 2) * W },
    "INCRBY's refusal (' 3')": { value: ' 3', pxat: (WID + 2) * W },
    'no expiry': { value: '3', pxat: 0 },
    text: { value: 'abc', pxat: (WID + 2) * W },
    'a hash': { hash: true },
  },
  1: {
    // fixed-window.lua: q + 2 x count, q = the count's window index mod 2
    none: null,
    'this window': { value: String((WID % 2) + 2 * 3), pxat: (WID + 1) * W },
    'this window, full': { value: String((WID % 2) + 2 * LIMIT), pxat: (WID + 1) * W },
    'the previous window (q)': { value: String(((WID - 1) % 2) + 2 * 3), pxat: (WID + 1) * W },
    'another expiry': { value: String((WID % 2) + 2 * 3), pxat: (WID + 3) * W },
    'another expiry, full': { value: String((WID % 2) + 2 * LIMIT), pxat: (WID + 3) * W },
    "INCRBY's refusal (' 7')": { value: ` ${(WID % 2) + 2 * 3}`, pxat: (WID + 1) * W },
    'no expiry': { value: String((WID % 2) + 2 * 2), pxat: 0 },
    negative: { value: '-4', pxat: (WID + 1) * W },
    text: { value: 'abc', pxat: (WID + 1) * W },
    'a hash': { hash: true },
  },
}

/** A connection for script tests: `serverMs` is the server's time when it opened. */
export interface ScriptClient {
  readonly client: Awaited<ReturnType<typeof nodeRedis>>
  readonly serverMs: number
  /** The script's reply to EVAL of its source. */
  run(script: Script, keys: string[], args: string[]): Promise<number[]>
  /** Stores `state` under `key`, replacing what was there. */
  set(key: string, state: State): Promise<void>
  /** A key's type, expiry and value (a string's), to compare two keys. */
  stored(key: string): Promise<unknown[]>
}

/** A ScriptClient opened before the suite's tests and closed after them. */
export function scriptSuite(): ScriptClient {
  let client: ScriptClient['client'] | undefined
  let serverMs = 0
  beforeAll(async () => {
    client = await nodeRedis()
    const [s, us] = (await client.sendCommand(['TIME'])) as string[]
    serverMs = Number(s) * 1000 + Math.floor(Number(us) / 1000)
  })
  afterAll(async () => {
    await client?.quit()
  })
  const send = (args: string[]) => client!.sendCommand(args)
  return {
    get client() {
      return client!
    },
    get serverMs() {
      return serverMs
    },
    run: async (script, keys, args) =>
      (await send(['EVAL', script.source, String(keys.length), ...keys, ...args])) as unknown as number[],
    set: async (key, state) => {
      await send(['DEL', key])
      if (!state) return
      if ('hash' in state) await send(['HSET', key, 'f', '1'])
      else if (state.pxat) await send(['SET', key, state.value, 'PXAT', String(state.pxat)])
      else await send(['SET', key, state.value])
    },
    stored: async (key) => {
      const type = String(await send(['TYPE', key]))
      const value = type === 'string' ? await send(['GET', key]) : null
      return [type, await send(['PEXPIRETIME', key]), value]
    },
  }
}

/** A redis-server of the test's own (its CONFIG SET and RESETSTAT reach no other suite), and a client. */
export async function ownServer() {
  const server = await startRedisServer()
  const client = createClient({ url: server.url })
  client.on('error', () => {})
  await client.connect()
  const stop = async () => {
    await client.quit()
    await server.stop()
  }
  return { client, stop }
}

/** How many times the server ran `cmd` (INFO commandstats, a script's commands included). */
export async function commandCalls(client: Awaited<ReturnType<typeof ownServer>>['client'], cmd: string) {
  const stats = String(await client.sendCommand(['INFO', 'commandstats']))
  return Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
}
