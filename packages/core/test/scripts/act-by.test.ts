/**
 * The act-by time of a spending script: a script that starts after it changes nothing and answers
 * -2 for each consume (consume.lua's `{ now_us, -2 }`, batch.lua's -2 per call), while peeks and a
 * bound still ahead are unaffected. Past and future bounds are a day away from now, so the outcome
 * never depends on when the script runs.
 */
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { BATCH, CONSUME, type Script } from '../../src/entries/scripts'
import { nodeRedis } from '../clients'

const DAY = 86_400_000
const FIXED = ['1', '10', String(DAY), '10'] // fixed-window, limit 10 per day
const TOKENS = ['4', '10', String(DAY), '10'] // token-bucket, capacity 10

describe('act-by: a script that starts too late changes nothing', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let serverMs: number
  beforeAll(async () => {
    client = await nodeRedis()
    const [s, us] = (await client.sendCommand(['TIME'])) as string[]
    serverMs = Number(s) * 1000 + Math.floor(Number(us) / 1000)
  })
  afterAll(async () => {
    await client.quit()
  })

  const evalScript = async (script: Script, keys: string[], args: string[]) =>
    (await client.sendCommand(['EVAL', script.source, String(keys.length), ...keys, ...args])) as number[]
  const past = () => String(serverMs - DAY)
  const ahead = () => String(serverMs + DAY)
  const exists = (keys: string[]) => client.sendCommand(['EXISTS', ...keys]) as Promise<number>

  it('consume: past its act-by, -2 and no key written; ahead of it, or 0, or none, it spends', async () => {
    const p = uniquePrefix('actby')
    const keys = [`${p}:{a}:x:fw-1d`, `${p}:{a}:y:tb-1d`]
    const pairs = [...FIXED, ...TOKENS]
    const late = await evalScript(CONSUME, keys, ['2', ...pairs, past()])
    expect(late).toHaveLength(2)
    expect(late[1]).toBe(-2)
    // a cost per pair (ARGV[1] = -1) with an act-by after the costs
    expect((await evalScript(CONSUME, keys, ['-1', ...pairs, '1', '3', past()]))[1]).toBe(-2)
    expect(await exists(keys)).toBe(0)

    for (const bound of [[ahead()], ['0'], []]) {
      const reply = await evalScript(CONSUME, keys, ['1', ...pairs, ...bound])
      expect(reply).toHaveLength(2 + 5 * 2)
      expect(reply[1]).toBe(1)
    }
    const per = await evalScript(CONSUME, keys, ['-1', ...pairs, '1', '3', ahead()])
    expect(per).toHaveLength(2 + 5 * 2)
    expect([per[3], per[8]]).toEqual([10 - 4, 10 - 6])
  })

  it('batch: past its act-by, every consume answers -2 and writes nothing; peeks still answer', async () => {
    const p = uniquePrefix('actby-batch')
    const key = (i: number, policy: string) => `${p}:{c${i}}:${policy}`
    // '#' 1: fixed-window; 'x' run of two consumes; 'y' run of one peek; 'c' one consume (token-bucket);
    // 'm' run of one two-pair consume; 'p' one peek
    const keys = [key(1, 'f'), key(2, 'f'), key(3, 'f'), key(4, 't'), key(5, 'f'), key(5, 't'), key(6, 't')]
    const args = (bound: string) => [
      '@',
      bound,
      '#',
      ...FIXED,
      '#',
      ...TOKENS,
      'x',
      '1',
      '1',
      '2',
      'y',
      '1',
      '1',
      '1',
      'c',
      '1',
      '1',
      ...TOKENS,
      'm',
      '1',
      '2',
      '1',
      '1',
      '2',
      'p',
      '1',
      '1',
      ...TOKENS,
    ]
    const late = await evalScript(BATCH, keys, args(past()))
    expect(late.slice(1)).toEqual([
      -2,
      -2,
      1,
      10,
      expect.any(Number),
      0,
      expect.any(Number),
      -2,
      -2,
      1,
      1,
      10,
      expect.any(Number),
      0,
      expect.any(Number),
    ])
    expect(await exists(keys)).toBe(0)

    const inTime = await evalScript(BATCH, keys, args(ahead()))
    // x: two calls of 5 each; y: 5; c: allowed + 5; m: allowed + 10; p: allowed + 5
    expect(inTime).toHaveLength(1 + 10 + 5 + 6 + 11 + 6)
    expect([inTime[1], inTime[6], inTime[16], inTime[22]]).toEqual([1, 1, 1, 1])
    expect(await exists(keys)).toBe(5) // every key but the peeks'
  })
})
