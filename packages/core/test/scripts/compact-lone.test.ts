/**
 * The straight-line paths of a compact pair against the general path (ALG[7], ALG[8] check and commit):
 * consume.lua's lone path and a batch's run of one compact policy (includes/compact-straight.lua), and
 * the inline paths of the algorithm's `run`, against the same call as a batch 'c' op. Two buckets start from the same stored
 * state and get the same call; for consume.lua the second call has no pattern tail (and so no version
 * key), which sends it the general way and changes nothing else. Replies, the levels' fields, types and
 * expiries must match. Each is sent lean too (its first level only, keys.lua): the same, or "resend whole"
 * having changed nothing, where its first level is full. The window lasts until 2065, so no window boundary falls during the test.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { BATCH, BY_ALGORITHM, CONSUME } from '../../src/entries/scripts'
import { commandCalls, LIMIT, M, ownServer, scriptSuite, W, WID } from './states'

/** A bucket's first level: its fields (the identity's is F) and its expiry (0: none), or another type. */
type Level = { fields: Record<string, string>; pxat: number } | { string: true } | null

const fields = (f: string) => ({ F: f, G: '1' })
/** A first level's other fields: with no room (256 fields) none of them the identity's, or `n` of them. */
const full = (value: string, n = 256) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`g${i}`, value]))
const level: Record<7 | 8, Record<string, Level>> = {
  7: {
    none: null,
    'another identity only': { fields: { G: '2' }, pxat: (WID + 1) * W },
    'another identity only, no expiry': { fields: { G: '2' }, pxat: 0 },
    'a full first level': { fields: full('2'), pxat: (WID + 1) * W },
    'this window': { fields: fields('3'), pxat: (WID + 1) * W },
    'this window, full': { fields: fields(String(LIMIT)), pxat: (WID + 1) * W },
    // an older window's level still alive: its count read as it stands, a refusal checked
    'another expiry': { fields: fields('3'), pxat: (WID + 3) * W },
    'another expiry, full': { fields: fields(String(LIMIT)), pxat: (WID + 3) * W },
    'refunded to 0': { fields: fields('0'), pxat: (WID + 1) * W },
    // HINCRBY first cannot tell a 0 from no field: both are written in place, whatever the expiry
    'refunded to 0, no expiry': { fields: fields('0'), pxat: 0 },
    'refunded to 0, alone': { fields: { F: '0' }, pxat: (WID + 1) * W },
    'refunded to 0, alone, no expiry': { fields: { F: '0' }, pxat: 0 },
    'refunded to 0, a full first level': { fields: { F: '0', ...full('2', 255) }, pxat: (WID + 1) * W },
    // a count HINCRBY does not read but tonumber does
    "' 3'": { fields: fields(' 3'), pxat: (WID + 1) * W },
    "'2e0'": { fields: fields('2e0'), pxat: (WID + 1) * W },
    'no expiry': { fields: fields('2'), pxat: 0 },
    'no expiry, full': { fields: fields(String(LIMIT)), pxat: 0 },
    text: { fields: fields('abc'), pxat: (WID + 1) * W },
    'a string': { string: true },
  },
  8: {
    none: null,
    'another identity only': { fields: { G: String((WID % 2) + 2) }, pxat: (WID + 2) * W },
    "another identity only, the previous window's": {
      fields: { G: String(((WID - 1) % 2) + 2) },
      pxat: (WID + 1) * W,
    },
    'another identity only, no expiry': { fields: { G: String((WID % 2) + 2) }, pxat: 0 },
    'a full first level': { fields: full(String((WID % 2) + 2)), pxat: (WID + 2) * W },
    'this window': { fields: fields(String((WID % 2) + 2 * 3 + 1 * M)), pxat: (WID + 2) * W },
    'this window, full': { fields: fields(String((WID % 2) + 2 * LIMIT)), pxat: (WID + 2) * W },
    'this window, previous full': {
      fields: fields(String((WID % 2) + 2 * 1 + LIMIT * M)),
      pxat: (WID + 2) * W,
    },
    'the previous window': { fields: fields(String(((WID - 1) % 2) + 2 * 4 + 2 * M)), pxat: (WID + 1) * W },
    'the previous window, weighted full': {
      fields: fields(String(((WID - 1) % 2) + 2 * LIMIT)),
      pxat: (WID + 1) * W,
    },
    // q says the previous window, the expiry this one: a refusal goes by the expiry
    'a q the expiry contradicts': {
      fields: fields(String(((WID - 1) % 2) + 2 * LIMIT)),
      pxat: (WID + 2) * W,
    },
    "this window's q, the previous window's expiry": {
      fields: fields(String((WID % 2) + 2 * LIMIT)),
      pxat: (WID + 1) * W,
    },
    'no counts': { fields: fields(String(WID % 2)), pxat: (WID + 2) * W },
    // a 0 (HINCRBY first cannot tell it from no field), in a bucket of this window, the window before,
    // none, or alone
    'refunded to 0': { fields: fields('0'), pxat: (WID + 2) * W },
    "refunded to 0, the previous window's": { fields: fields('0'), pxat: (WID + 1) * W },
    'refunded to 0, no expiry': { fields: fields('0'), pxat: 0 },
    'refunded to 0, alone, no expiry': { fields: { F: '0' }, pxat: 0 },
    "refunded to 0, a full first level, the previous window's": {
      fields: { ...full(String(((WID - 1) % 2) + 2), 255), F: '0' },
      pxat: (WID + 1) * W,
    },
    "a full first level, the previous window's": {
      fields: full(String(((WID - 1) % 2) + 2)),
      pxat: (WID + 1) * W,
    },
    "' 7'": { fields: fields(` ${(WID % 2) + 2 * 3}`), pxat: (WID + 2) * W },
    'past 2^53': { fields: fields('9007199254740993'), pxat: (WID + 2) * W },
    'no expiry': { fields: fields(String((WID % 2) + 2 * 2)), pxat: 0 },
    'no expiry, full': { fields: fields(String((WID % 2) + 2 * LIMIT)), pxat: 0 },
    text: { fields: fields('abc'), pxat: (WID + 2) * W },
    'a string': { string: true },
  },
}

/** Writes a bucket's levels in a given state, and reads back what they hold (type, expiry, value). */
function levelsOn(send: (args: string[]) => Promise<unknown>) {
  const put = async (levels: string[], state: Level) => {
    await send(['DEL', ...levels])
    if (!state) return
    if ('string' in state) {
      await send(['SET', levels[0]!, '3'])
      return
    }
    await send(['HSET', levels[0]!, ...Object.entries(state.fields).flat()])
    if (state.pxat) await send(['PEXPIREAT', levels[0]!, String(state.pxat)])
  }
  const stored = async (levels: string[]) =>
    Promise.all(
      levels.map(async (key) => {
        const type = String(await send(['TYPE', key]))
        const value =
          type === 'hash' ? await send(['HGETALL', key]) : type === 'string' ? await send(['GET', key]) : null
        return [type, await send(['PEXPIRETIME', key]), value]
      }),
    )
  return { put, stored }
}

describe('consume: the lone path of a compact pair answers as the general path', () => {
  const c = scriptSuite()
  const send = (args: string[]) => c.client.sendCommand(args)
  const absolute = (r: number[]) => {
    if (r.length === 2) return r.slice(1)
    const nowMs = Math.floor(r[0]! / 1000)
    return r.slice(1).map((v, i) => ((i === 3 || i === 4) && v > 0 ? nowMs + v : v))
  }
  const { put, stored } = levelsOn(send)

  it.each([
    [8, 'sliding-window'],
    [7, 'fixed-window'],
  ] as const)(
    '%s (compact %s): same replies, fields and expiries for every state, cost and act-by',
    async (code, _name) => {
      const p = uniquePrefix('clone')
      const lone = [`${p}:{~h:c1}:api:s`, `${p}:{~h:c1}:api:s!2`, `${p}:{~h:c1}:api:s!3`]
      const general = [`${p}:{~h:c2}:api:s`, `${p}:{~h:c2}:api:s!2`, `${p}:{~h:c2}:api:s!3`]
      // each pair's control key (none stored), then the call's control keys: the same one
      const loneCtl = `${p}:{~h:c1}:~c!F`
      const generalCtl = `${p}:{~h:c2}:~c!F`
      // a lean call (keys.lua): its first level, the call's control key, the version key
      const lean = [`${p}:{~h:c3}:api:s`, `${p}:{~h:c3}:api:s!2`, `${p}:{~h:c3}:api:s!3`]
      const leanKeys = [lean[0]!, `${p}:{~h:c3}:~c!F`, `${p}:{~h:c3}:~v`]
      const bounds = [[], ['0'], [String(c.serverMs + 86_400_000)], [String(c.serverMs - 86_400_000)]]
      let cases = 0
      let fast = 0
      let resent = 0
      for (const script of [CONSUME, BY_ALGORITHM[code]!.consume]) {
        for (const [name, state] of Object.entries(level[code])) {
          for (const cost of [0, 1, 2, LIMIT, LIMIT + 1]) {
            for (const bound of bounds) {
              await put(lone, state)
              await put(general, state)
              await put(lean, state)
              const args = [String(cost), String(code), String(LIMIT), String(W), 'F', ...bound]
              const a = await c.run(script, [...lone, loneCtl, loneCtl, `${p}:{~h:c1}:~v`], [...args, '~0'])
              // lean: the same, or "resend whole" (-4) having changed nothing, where its first level is full
              const before = await stored(lean)
              let l = await c.run(script, leanKeys, [...args, '~0'])
              const what = `${script.name}, ${name}, cost ${cost}, act-by ${bound.join() || 'none'}`
              if (l.length === 2 && l[1] === -4) {
                expect([what, await stored(lean)]).toEqual([what, before])
                l = await c.run(script, [...lean, leanKeys[1]!, leanKeys[1]!, leanKeys[2]!], [...args, '~0'])
                resent++
              }
              const b = await c.run(script, [...general, generalCtl, generalCtl], args)
              expect([what, absolute(a)]).toEqual([what, absolute(b)])
              expect([what, absolute(l)]).toEqual([what, absolute(b)])
              expect([what, await stored(lone)]).toEqual([what, await stored(general)])
              expect([what, await stored(lean)]).toEqual([what, await stored(general)])
              cases++
              if (a.length === 7) fast++
            }
          }
        }
      }
      expect(cases).toBe(2 * Object.keys(level[code]).length * 5 * 4)
      // the comparison covered answers, not only -2 past act_by
      expect(fast).toBeGreaterThan(cases / 2)
      // a full first level sends a lean call back, whatever the cost (not past its act-by: it reads nothing)
      expect(resent).toBeGreaterThan(0)
      expect(resent).toBeLessThan(cases / 4)
    },
  )
})

describe("a batch run's inline paths for a compact pair answer as the general path", () => {
  const c = scriptSuite()
  const send = (args: string[]) => c.client.sendCommand(args)
  const { put, stored } = levelsOn(send)
  // a call's five numbers, reset and retry as the times they name
  const five = (r: unknown[], from: number) => {
    const nowMs = Math.floor(Number(r[0]) / 1000)
    return r
      .slice(from, from + 5)
      .map((v, i) => ((i === 2 || i === 3) && Number(v) > 0 ? nowMs + Number(v) : v))
  }

  it.each([
    [8, 'sliding-window'],
    [7, 'fixed-window'],
  ] as const)(
    '%s (compact %s): the same replies, fields and expiries, consumes and peeks',
    async (code, _name) => {
      const p = uniquePrefix('cbatch')
      const run = [`${p}:{~h:c1}:api:s`, `${p}:{~h:c1}:api:s!2`, `${p}:{~h:c1}:api:s!3`]
      const one = [`${p}:{~h:c2}:api:s`, `${p}:{~h:c2}:api:s!2`, `${p}:{~h:c2}:api:s!3`]
      const first = [`${p}:{~h:c3}:api:s`, `${p}:{~h:c3}:api:s!2`, `${p}:{~h:c3}:api:s!3`]
      // each pair's control key (none stored) follows its levels
      const whole = (levels: string[]) => [...levels, `${levels[0]}~c`]
      let cases = 0
      let resent = 0
      for (const script of [BATCH, BY_ALGORITHM[code]!.batch]) {
        for (const [name, state] of Object.entries(level[code])) {
          for (const cost of [0, 1, 2, LIMIT, LIMIT + 1]) {
            for (const [runOp, oneOp] of [
              ['x', 'c'],
              ['y', 'p'],
              ['l', 'c'],
            ]) {
              // 'l': lean pairs, a first level and a control key each (keys.lua)
              const ctl = runOp === 'l' ? (levels: string[]) => [levels[0]!, `${levels[0]}~c`] : whole
              await put(run, state)
              await put(one, state)
              const policy = [String(code), String(LIMIT), String(W), 'F']
              const before = await stored(run)
              let a = await c.run(script, ctl(run), ['#', ...policy, runOp!, String(cost), '1', '1', 'F'])
              const b = await c.run(script, whole(one), [oneOp!, String(cost), '1', ...policy])
              const what = `${script.name}, ${name}, cost ${cost}, ${runOp}`
              if (a[1] === -4) {
                // "resend whole", having changed nothing: sent again as 'x'
                expect([what, a.slice(1), await stored(run)]).toEqual([what, [-4, 0, 0, 0, 0], before])
                a = await c.run(script, whole(run), ['#', ...policy, 'x', String(cost), '1', '1', 'F'])
                resent++
              }
              expect([what, five(a, 1)]).toEqual([what, five(b, 2)])
              expect([what, await stored(run)]).toEqual([what, await stored(one)])
              cases++
              // the same call second in a run whose first call the straight path does not take (text
              // for a count): the run's own loop decides it
              await put(run, state)
              await put(one, state)
              await put(first, { fields: { F: 'abc' }, pxat: (WID + (code === 8 ? 2 : 1)) * W })
              const c2 = await c.run(
                script,
                [...ctl(first), ...ctl(run)],
                ['#', ...policy, runOp!, String(cost), '1', '2', 'F', 'F'],
              )
              const d2 = await c.run(script, whole(one), [oneOp!, String(cost), '1', ...policy])
              if (c2[6] === -4) continue // as above: the first level is full
              expect([`${what}, second`, five(c2, 6)]).toEqual([`${what}, second`, five(d2, 2)])
              expect([`${what}, second`, await stored(run)]).toEqual([`${what}, second`, await stored(one)])
            }
          }
        }
      }
      expect(cases).toBe(2 * Object.keys(level[code]).length * 5 * 3)
      expect(resent).toBeGreaterThan(0)
    },
  )
})

describe('consume: a compact spend of a field with counts is one command', () => {
  /** consume.lua's lone call of a compact `code` pair, cost 1, for identity F of bucket `b`. */
  const loneCall = (client: Awaited<ReturnType<typeof ownServer>>['client'], code: 7 | 8, b: string) =>
    client.sendCommand([
      'EVAL',
      BY_ALGORITHM[code]!.consume.source,
      '6',
      `{${b}}:api:s`,
      `{${b}}:api:s!2`,
      `{${b}}:api:s!3`,
      `{${b}}:~c!F`,
      `{${b}}:~c!F`,
      `{${b}}:~v`,
      '1',
      String(code),
      String(LIMIT),
      String(W),
      'F',
      '~0',
    ]) as Promise<number[]>

  it.each([8, 7] as const)(
    'alg %s: HINCRBY alone admits; a refusal, a new field and OOM end as the HGET-first path leaves them',
    async (code) => {
      // its own server: CONFIG RESETSTAT and maxmemory would reach other suites
      const { client, stop } = await ownServer()
      const send = (args: string[]) => client.sendCommand(args)
      const { put, stored } = levelsOn(send)
      const levels = (b: string) => [`{${b}}:api:s`, `{${b}}:api:s!2`, `{${b}}:api:s!3`]
      const calls = (cmd: string) => commandCalls(client, cmd)
      const stats = async () => Promise.all(['hincrby', 'hget', 'hset', 'hlen', 'pexpiretime'].map(calls))
      try {
        const held = level[code]['this window']!
        await put(levels('a'), held)
        await put(levels('b'), level[code]['this window, full']!)
        await send(['CONFIG', 'RESETSTAT'])
        expect((await loneCall(client, code, 'a')).slice(1, 3)).toEqual([1, 1])
        expect(await stats()).toEqual([1, 0, 0, 0, 0])
        const [, pxat, value] = (await stored(levels('a')))[0]!
        const f = (value as Record<string, string>).F
        const before = (held as { fields: Record<string, string> }).fields.F!
        expect([Number(f), pxat]).toEqual([
          Number(before) + (code === 8 ? 2 : 1),
          (held as { pxat: number }).pxat,
        ])

        // a refusal takes its increment back: fields and expiry as they were
        const full = await stored(levels('b'))
        expect((await loneCall(client, code, 'b')).slice(1, 3)).toEqual([0, 0])
        expect(await stored(levels('b'))).toEqual(full)

        // a field HINCRBY creates in a level it creates gets its window's expiry and q
        expect((await loneCall(client, code, 'c')).slice(1, 3)).toEqual([1, 1])
        const fresh = (await stored(levels('c')))[0]!
        expect(fresh).toEqual([
          'hash',
          (WID + (code === 8 ? 2 : 1)) * W,
          { F: String(code === 8 ? (WID % 2) + 2 : 1) },
        ])

        // under maxmemory HINCRBY first is refused whole, for a field with counts and a new one alike
        await put(levels('e'), held)
        const e = await stored(levels('e'))
        await send(['CONFIG', 'SET', 'maxmemory-policy', 'noeviction'])
        await send(['CONFIG', 'SET', 'maxmemory', '1'])
        for (const b of ['e', 'd']) await expect(loneCall(client, code, b)).rejects.toThrow(/OOM/)
        await send(['CONFIG', 'SET', 'maxmemory', '0'])
        expect(await stored(levels('e'))).toEqual(e)
        expect(await send(['EXISTS', ...levels('d')])).toBe(0)
      } finally {
        await stop()
      }
    },
  )
})
