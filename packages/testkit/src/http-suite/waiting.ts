/** Ways to wait on a request in flight without assuming how long anything takes. */
import { sleepAtLeast } from '../time'

/** A gate a held handler waits on; `open()` lets every waiting handler answer. */
export function gate() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { hold: () => opened, open: () => open() }
}

/** Resolves once `check()` holds (a release lands just after the response: not a timing). */
export async function eventually(check: () => Promise<boolean>, what: string, tries = 500): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return
    await sleepAtLeast(10)
  }
  throw new Error(`never: ${what}`)
}
