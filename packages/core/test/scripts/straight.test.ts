/**
 * batch.lua's straight path (includes/straight.lua: one run of one-pair consumes of a sliding or fixed
 * window, no control key stored, the pattern version current) against its general path: two sets of
 * identities start from the same stored states and get the same batch; the second set has a control key
 * that changes nothing (an ended block and allow, an override of another policy), which sends its batch
 * the general way. Replies, the keys' values, types and expiries must match. A key comes back in the run,
 * so a call must see the write of the call before it.
 * The window lasts until 2065, so no window boundary falls during the test; reset and retry are compared
 * as the times they name (now + ms), since the two batches run a few µs apart.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { BATCH, BY_ALGORITHM, CONSUME } from '../../src/entries/scripts'
import { LIMIT, scriptSuite, states, W } from './states'

describe('batch: the straight path answers as the general path', () => {
  const c = scriptSuite()
  // each call's reset and retry as the server times they name; -2 and -3 stand alone
  const absolute = (r: number[]) => {
    const nowMs = Math.floor(r[0]! / 1000)
    if (r[1]! < 0) return r.slice(1)
    return r.slice(1).map((v, i) => ((i % 5 === 2 || i % 5 === 3) && v > 0 ? nowMs + v : v))
  }

  it.each([
    [2, 'sliding-window'],
    [1, 'fixed-window'],
  ] as const)(
    '%s (%s): same replies, values and expiries for every state, cost, act-by and version',
    async (code, _name) => {
      const p = uniquePrefix('straight')
      // the general set's second identity has a control key: stored, so its batch goes the general way
      await c.client.sendCommand(['HSET', `${p}:{b2}:~c`, 'b', '1', 'a', '1', 'o', '0|other=1'])
      await c.client.sendCommand(['SET', `${p}:~v3`, '3'])
      // version key and version: missing (version 0); current; stale (-3 on both paths); stored but the
      // caller holds 0 (stale too)
      const versions: [string, string][] = [
        [`${p}:~v0`, '0'],
        [`${p}:~v3`, '3'],
        [`${p}:~v3`, '2'],
        [`${p}:~v3`, '0'],
      ]
      const bounds = [[], ['@', String(c.serverMs + 86_400_000)], ['@', String(c.serverMs - 86_400_000)]]
      const script = BY_ALGORITHM[code]!.batch
      let cases = 0
      for (const s of [BATCH, script]) {
        for (const [name, state] of Object.entries(states[code])) {
          for (const cost of [0, 1, 2, LIMIT + 1]) {
            for (const bound of bounds) {
              for (const [versionKey, version] of versions) {
                const replies: number[][] = []
                const keys: string[][] = []
                for (const who of ['a', 'b']) {
                  const k1 = `${p}:{${who}1}:api:s`
                  const k2 = `${p}:{${who}2}:api:s`
                  await c.set(k1, state)
                  await c.set(k2, states[code]['this window']!)
                  // calls on k1, k2, k1, k1: the last see the writes of the first
                  const args = ['v', version, ...bound, '~', '2', '#', String(code), String(LIMIT), String(W)]
                  args.push(String(LIMIT), 'x', String(cost), '1', '4')
                  const ctl = [`${p}:{${who}1}:~c`, `${p}:{${who}2}:~c`]
                  replies.push(await c.run(s, [versionKey, ...ctl, k1, k2, k1, k1], args))
                  keys.push([k1, k2])
                }
                const what = `${s.name}, ${name}, cost ${cost}, act-by ${bound.join() || 'none'}, version ${version}`
                expect([what, absolute(replies[0]!)]).toEqual([what, absolute(replies[1]!)])
                for (let i = 0; i < 2; i++) {
                  expect([what, await c.stored(keys[0]![i]!)]).toEqual([what, await c.stored(keys[1]![i]!)])
                }
                cases++
              }
            }
          }
        }
      }
      expect(cases).toBe(2 * Object.keys(states[code]).length * 4 * 3 * 4)
    },
  )

  it.each([
    [2, 'sliding-window'],
    [1, 'fixed-window'],
  ] as const)(
    '%s (%s) with a second policy: calls of two pairs spend on both or neither, as the general path',
    async (code, _name) => {
      const p = uniquePrefix('straight-m')
      await c.client.sendCommand(['HSET', `${p}:{b2}:~c`, 'b', '1', 'a', '1', 'o', '0|other=1'])
      const script = BY_ALGORITHM[code]!.batch
      let cases = 0
      for (const s of [BATCH, script]) {
        // the second policy: the other algorithm in the script that carries both, else the same
        const other = s === BATCH ? 3 - code : code
        for (const [name, state] of Object.entries(states[code])) {
          // the second pair: room left, or full (every call refused, nothing spent on the first)
          for (const second of ['this window', 'this window, full'] as const) {
            for (const cost of [0, 1, 2]) {
              const replies: number[][] = []
              const keys: string[][] = []
              for (const who of ['a', 'b']) {
                const k1 = `${p}:{${who}1}:api:s`
                const j1 = `${p}:{${who}1}:acct:s`
                const k2 = `${p}:{${who}2}:api:s`
                const j2 = `${p}:{${who}2}:acct:s`
                await c.set(k1, state)
                await c.set(j1, states[other as 1 | 2][second]!)
                await c.set(k2, states[code]['this window']!)
                await c.set(j2, null)
                const args = ['v', '0', '~', '2']
                args.push('#', String(code), String(LIMIT), String(W), String(LIMIT))
                args.push('#', String(other), String(LIMIT), String(W), String(LIMIT))
                args.push('m', String(cost), '2', '3', '1', '2')
                const ctl = [`${p}:{${who}1}:~c`, `${p}:{${who}2}:~c`]
                // calls on (k1, j1), (k2, j2), (k1, j1)
                replies.push(await c.run(s, [`${p}:~v0`, ...ctl, k1, j1, k2, j2, k1, j1], args))
                keys.push([k1, j1, k2, j2])
              }
              const what = `${s.name}, ${name}, second ${second}, cost ${cost}`
              expect([what, wholeAbsolute(replies[0]!)]).toEqual([what, wholeAbsolute(replies[1]!)])
              for (let i = 0; i < 4; i++) {
                expect([what, await c.stored(keys[0]![i]!)]).toEqual([what, await c.stored(keys[1]![i]!)])
              }
              cases++
            }
          }
        }
      }
      expect(cases).toBe(2 * Object.keys(states[code]).length * 2 * 3)
    },
  )
  it.each([
    [2, 'sliding-window'],
    [1, 'fixed-window'],
  ] as const)(
    'consume, %s (%s): a lone call of two pairs answers as the general path',
    async (code, _name) => {
      const p = uniquePrefix('straight-c')
      await c.client.sendCommand(['HSET', `${p}:{b}:~c`, 'b', '1', 'a', '1', 'o', '0|other=1'])
      await c.client.sendCommand(['SET', `${p}:~v3`, '3'])
      const bounds = [[], ['0'], [String(c.serverMs + 86_400_000)], [String(c.serverMs - 86_400_000)]]
      const tails: [string[], string[]][] = [
        [[], []],
        [[`${p}:~v0`], ['~0']],
        [[`${p}:~v3`], ['~3']],
        [[`${p}:~v3`], ['~2']],
        [[`${p}:~v3`], ['~0']],
      ]
      let cases = 0
      for (const s of [CONSUME, BY_ALGORITHM[code]!.consume]) {
        const other = s === CONSUME ? 3 - code : code
        for (const [name, state] of Object.entries(states[code])) {
          for (const second of ['this window', 'this window, full'] as const) {
            for (const cost of [0, 1, LIMIT + 1]) {
              for (const bound of bounds) {
                for (const [version, tail] of tails) {
                  const replies: number[][] = []
                  const keys: string[][] = []
                  for (const who of ['a', 'b']) {
                    const k = `${p}:{${who}}:api:s`
                    const j = `${p}:{${who}}:acct:s`
                    await c.set(k, state)
                    await c.set(j, states[other as 1 | 2][second]!)
                    const args = [String(cost), String(code), String(LIMIT), String(W), String(LIMIT)]
                    args.push(String(other), String(LIMIT), String(W), String(LIMIT), ...bound, ...tail)
                    replies.push(await c.run(s, [k, j, `${p}:{${who}}:~c`, ...version], args))
                    keys.push([k, j])
                  }
                  const what = `${s.name}, ${name}, second ${second}, cost ${cost}, act-by ${bound.join() || 'none'}, ${tail}`
                  expect([what, wholeAbsolute(replies[0]!)]).toEqual([what, wholeAbsolute(replies[1]!)])
                  for (let i = 0; i < 2; i++) {
                    expect([what, await c.stored(keys[0]![i]!)]).toEqual([what, await c.stored(keys[1]![i]!)])
                  }
                  cases++
                }
              }
            }
          }
        }
      }
      expect(cases).toBe(2 * Object.keys(states[code]).length * 2 * 3 * 4 * 5)
    },
  )
  // two-pair calls' replies: per call its allowed, then 5 per pair, reset and retry as server times
  const wholeAbsolute = (r: number[]) => {
    const nowMs = Math.floor(r[0]! / 1000)
    return r.slice(1).map((v, i) => {
      const j = (i % 11) - 1 // within a pair's 5; -1: the call's allowed
      return (j % 5 === 2 || j % 5 === 3) && v > 0 ? nowMs + v : v
    })
  }
})
