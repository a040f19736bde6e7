/**
 * consume.lua's lone path (includes/lone.lua: one sliding- or fixed-window pair, no control key stored)
 * against its general path: two identities start from the same stored state and get the same call; the
 * second has a control key that changes nothing (an ended block and allow, an override of another
 * policy), which sends its call the general way. Both carry the same pattern tail (pattern.lua). Replies,
 * the keys' values, types and expiries must match.
 * The window lasts until 2065, so no window boundary falls during the test; reset and retry are compared
 * as the times they name (now + ms), since the two calls run a few µs apart.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { BY_ALGORITHM, CONSUME } from '../../src/entries/scripts'
import { nodeRedis } from '../clients'
import { commandCalls, LIMIT, ownServer, scriptSuite, states, W } from './states'

describe('consume: the lone path answers as the general path', () => {
  const c = scriptSuite()
  // reset and retry as the server times they name, so two calls a few µs apart compare equal
  const absolute = (r: number[]) => {
    if (r.length === 2) return r.slice(1)
    const nowMs = Math.floor(r[0]! / 1000)
    return r.slice(1).map((v, i) => ((i === 3 || i === 4) && v > 0 ? nowMs + v : v))
  }

  it.each([
    [2, 'sliding-window'],
    [1, 'fixed-window'],
  ] as const)(
    '%s (%s): same replies, values and expiries for every state, cost, act-by and pattern tail',
    async (code, _name) => {
      const p = uniquePrefix('lone')
      const lone = `${p}:{a}:api:s`
      const general = `${p}:{b}:api:s`
      // exists, so the general path runs; changes nothing: both entries ended, the override is another policy's
      await c.client.sendCommand(['HSET', `${p}:{b}:~c`, 'b', '1', 'a', '1', 'o', '0|other=1'])
      const bounds = [[], ['0'], [String(c.serverMs + 86_400_000)], [String(c.serverMs - 86_400_000)]]
      // the pattern tail and version key (pattern.lua), as RedisStore sends them: none; bare, version key
      // missing (no pattern ever set) or current; stale, also from version 0 (-3 on both paths); a pattern value (another
      // policy's: both calls go the general way)
      await c.client.sendCommand(['SET', `${p}:~v3`, '3'])
      const tails: [string[], string[]][] = [
        [[], []],
        [[`${p}:~v0`], ['~0']],
        [[`${p}:~v3`], ['~3']],
        [[`${p}:~v3`], ['~2']],
        [[`${p}:~v3`], ['~0']],
        [[`${p}:~v3`], ['~3;0|other=1']],
      ]
      let cases = 0
      for (const script of [CONSUME, BY_ALGORITHM[code]!.consume]) {
        for (const [name, state] of Object.entries(states[code])) {
          for (const cost of [0, 1, 2, LIMIT, LIMIT + 1]) {
            for (const bound of bounds) {
              for (const [version, tail] of tails) {
                await c.set(lone, state)
                await c.set(general, state)
                const args = [
                  String(cost),
                  String(code),
                  String(LIMIT),
                  String(W),
                  String(LIMIT),
                  ...bound,
                  ...tail,
                ]
                const a = await c.run(script, [lone, `${p}:{a}:~c`, ...version], args)
                const b = await c.run(script, [general, `${p}:{b}:~c`, ...version], args)
                const what = `${script.name}, ${name}, cost ${cost}, act-by ${bound.join() || 'none'}, ${tail}`
                expect([what, absolute(a)]).toEqual([what, absolute(b)])
                expect([what, await c.stored(lone)]).toEqual([what, await c.stored(general)])
                cases++
              }
            }
          }
        }
      }
      // the lone path also answers a call sent without the control key
      await c.set(lone, states[code]['this window']!)
      await c.set(general, states[code]['this window']!)
      const args = ['1', String(code), String(LIMIT), String(W), String(LIMIT)]
      expect(absolute(await c.run(CONSUME, [lone], args))).toEqual(
        absolute(await c.run(CONSUME, [general, `${p}:{b}:~c`], args)),
      )
      expect(await c.stored(lone)).toEqual(await c.stored(general))
      expect(cases).toBe(2 * Object.keys(states[code]).length * 5 * 4 * 6)
    },
  )
})

describe('sliding window: the parity q and the expiry', () => {
  it("in a window's first 50 ms, a key two windows older than q says counts nothing, on both paths", async () => {
    const client = await nodeRedis()
    try {
      const [s, us] = (await client.sendCommand(['TIME'])) as string[]
      // a window that began 5 ms ago (index 1), and a count of `LIMIT` whose q says this window but
      // whose expiry rounds to the end of window -1: alive past its end, as MIGRATE can leave a key
      const w = Number(s) * 1000 + Math.floor(Number(us) / 1000) - 5
      const p = uniquePrefix('early')
      const keys = [`${p}:{a}:api:s`, `${p}:{b}:api:s`]
      await client.sendCommand(['HSET', `${p}:{b}:~c`, 'b', '1']) // an ended block: the general path
      const replies: number[][] = []
      for (const key of keys) {
        await client.sendCommand(['SET', key, String(1 + 2 * LIMIT), 'PXAT', String(w + 1_000_000)])
        const args = ['1', '2', String(LIMIT), String(w), String(LIMIT)]
        const ctl = key.replace(':api:s', ':~c')
        const keyArgs = [key, ctl]
        replies.push(
          (await client.sendCommand(['EVAL', CONSUME.source, '2', ...keyArgs, ...args])) as number[],
        )
      }
      for (const r of replies) {
        // where the script ran 50 ms or more into the window, q alone decides: the count refuses
        const early = Math.floor(r[0]! / 1000) - w < 50
        expect([early, r[1]]).toEqual([early, early ? 1 : 0])
      }
    } finally {
      await client.quit()
    }
  })
})

/** consume.lua's lone call of one `code` pair on `key`, cost 1, as RedisStore sends it; then `tail`. */
const loneCall = (
  client: Awaited<ReturnType<typeof ownServer>>['client'],
  code: 1 | 2,
  key: string,
  ...tail: string[]
) =>
  client.sendCommand([
    'EVAL',
    BY_ALGORITHM[code]!.consume.source,
    '2',
    key,
    `${key.slice(0, 3)}:~c`,
    '1',
    String(code),
    String(LIMIT),
    String(W),
    String(LIMIT),
    ...tail,
  ]) as Promise<number[]>

describe('consume: the lone path under maxmemory', () => {
  it.each([2, 1] as const)(
    'alg %s: the spend is refused whole, INCRBY path and SET path alike',
    async (code) => {
      // its own server: maxmemory would fail every other suite's writes
      const { client, stop } = await ownServer()
      try {
        const held = `{a}:api:held` // holds this window's count: the lone path spends with INCRBY
        const fresh = `{b}:api:fresh` // missing: the lone path spends with SET ... PXAT
        const state = states[code]['this window'] as { value: string; pxat: number }
        await client.sendCommand(['SET', held, state.value, 'PXAT', String(state.pxat)])
        const before = [
          await client.sendCommand(['GET', held]),
          await client.sendCommand(['PEXPIRETIME', held]),
        ]
        await client.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'noeviction'])
        await client.sendCommand(['CONFIG', 'SET', 'maxmemory', '1'])
        for (const key of [held, fresh]) await expect(loneCall(client, code, key, '0')).rejects.toThrow(/OOM/)
        await client.sendCommand(['CONFIG', 'SET', 'maxmemory', '0'])
        expect([
          await client.sendCommand(['GET', held]),
          await client.sendCommand(['PEXPIRETIME', held]),
        ]).toEqual(before)
        expect(await client.sendCommand(['EXISTS', fresh])).toBe(0)
      } finally {
        await stop()
      }
    },
  )
})

describe('consume: a spend of this window is one command', () => {
  it.each([2, 1] as const)(
    'alg %s: INCRBY alone admits; a refusal and a new key end as the GET-first path leaves them',
    async (code) => {
      // its own server: CONFIG RESETSTAT would reset other suites' counts
      const { client, stop } = await ownServer()
      const consume = (key: string) => loneCall(client, code, key)
      const calls = (cmd: string) => commandCalls(client, cmd)
      const stored = async (key: string) => [
        await client.sendCommand(['GET', key]),
        await client.sendCommand(['PEXPIRETIME', key]),
      ]
      try {
        const held = `{a}:api:held`
        const full = `{b}:api:full`
        const fresh = `{c}:api:fresh`
        const state = states[code]['this window'] as { value: string; pxat: number }
        const atLimit = states[code]['this window, full'] as { value: string; pxat: number }
        await client.sendCommand(['SET', held, state.value, 'PXAT', String(state.pxat)])
        await client.sendCommand(['SET', full, atLimit.value, 'PXAT', String(atLimit.pxat)])
        await client.sendCommand(['CONFIG', 'RESETSTAT'])
        expect((await consume(held)).slice(1, 3)).toEqual([1, 1])
        expect([await calls('incrby'), await calls('get'), await calls('set')]).toEqual([1, 0, 0])
        expect(await stored(held)).toEqual([String(Number(state.value) + 2), state.pxat])

        // a refusal takes its increment back: value and expiry as they were
        const before = await stored(full)
        expect((await consume(full)).slice(1, 3)).toEqual([0, 0])
        expect(await stored(full)).toEqual(before)

        // a key INCRBY creates is SET with its window's expiry, as a missing key always was
        expect((await consume(fresh)).slice(1, 3)).toEqual([1, 1])
        const [value, pxat] = await stored(fresh)
        expect(Number(value) % 2).toBe(Number(state.value) % 2)
        expect(pxat).toBe(state.pxat)
      } finally {
        await stop()
      }
    },
  )
})
