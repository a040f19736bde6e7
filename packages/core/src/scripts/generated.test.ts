import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { CALENDAR_CODE } from '../algorithms'
import {
  ALGORITHM_CODES,
  BATCH,
  BY_ALGORITHM,
  COMPACT_CODES,
  CONSUME,
  PEEK,
  REFUND,
  type Script,
} from '../entries/scripts'
import * as generated from './generated'

it('the committed generated scripts module matches lua/*.lua', () => {
  // exits non-zero (and throws here) if packages/core/src/scripts/generated.ts is stale
  execFileSync(process.execPath, [join(__dirname, '../../../../scripts/gen-lua.mjs'), '--check'], {
    stdio: 'pipe',
  })
})

it('every script carries the SHA1 of its own source (what EVALSHA is sent)', () => {
  const wrong: string[] = []
  for (const [name, s] of Object.entries(generated)) {
    if (typeof s !== 'object' || s === null || !('sha1' in s)) continue
    const script = s as { source: string; sha1: string }
    if (createHash('sha1').update(script.source).digest('hex') !== script.sha1) wrong.push(name)
  }
  expect(wrong).toEqual([])
})

it("BY_ALGORITHM holds each algorithm's own consume, peek, refund and batch scripts, by its code", () => {
  const general = { consume: CONSUME, peek: PEEK, refund: REFUND, batch: BATCH }
  const kinds = Object.keys(general) as (keyof typeof general)[]
  expect(BY_ALGORITHM[0]).toBeUndefined()
  const codes = {
    ...ALGORITHM_CODES,
    ...Object.fromEntries(Object.entries(COMPACT_CODES).map(([a, code]) => [`compact-${a}`, code])),
    calendar: CALENDAR_CODE,
  }
  expect(BY_ALGORITHM).toHaveLength(1 + Object.keys(codes).length)
  const indexed = new Set<string>()
  for (const [algorithm, code] of Object.entries(codes)) {
    const own = BY_ALGORITHM[code]
    expect(own && Object.keys(own).sort()).toEqual([...kinds].sort())
    for (const kind of kinds) {
      expect(own![kind].name).toBe(`${kind}_${algorithm.replace(/-/g, '_')}`)
      // one algorithm's Lua only, so less than the general script that carries them all
      expect(own![kind].source.length).toBeLessThan(general[kind].source.length)
      indexed.add(own![kind].sha1)
    }
  }
  // every single-algorithm script the generator writes is reachable through BY_ALGORITHM
  const own = Object.values(generated).filter(
    (s): s is Script => typeof s === 'object' && s !== null && 'sha1' in s && s.name.includes('_'),
  )
  expect(own).toHaveLength(kinds.length * Object.keys(codes).length)
  expect(indexed.size).toBe(own.length)
  for (const s of own) expect(indexed.has(s.sha1)).toBe(true)
})
