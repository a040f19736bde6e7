import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import * as generated from '../../src/scripts/generated'

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
