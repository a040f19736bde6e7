import { execFileSync } from 'node:child_process'
import { join } from 'node:path'

it('the committed generated scripts module matches lua/*.lua', () => {
  // exits non-zero (and throws here) if packages/core/src/scripts/generated.ts is stale
  execFileSync(process.execPath, [join(__dirname, '../../../scripts/gen-lua.mjs'), '--check'], {
    stdio: 'pipe',
  })
})
