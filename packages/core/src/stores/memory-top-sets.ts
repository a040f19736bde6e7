/**
 * The top sets in process, twin of the Redis ones (top.lua): a map per set, trimmed to its cap after each
 * add to its most refused members (ties: the greater identity), forgotten once expired. At most
 * `maxSets` sets are held (the oldest go first); each holds at most its cap.
 * @module
 */
import type { TopSets } from '../types'

interface TopSet {
  expiresAtMs: number
  readonly counts: Map<string, number>
}

/** Most refused first; ties: the greater identity first, as ZRANGE ... REV orders equal scores. */
const byRefusals = (a: [string, number], b: [string, number]) =>
  b[1] - a[1] || (a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : 0)

export class MemoryTopSets implements TopSets {
  private readonly sets = new Map<string, TopSet>()

  constructor(
    /** Epoch ms now. */
    private readonly nowMs: () => number,
    private readonly maxSets = 1024,
  ) {}

  add(key: string, cap: number, expiresAtMs: number, counts: ReadonlyMap<string, number>): Promise<void> {
    let set = this.live(key)
    if (set === undefined) {
      if (this.sets.size >= this.maxSets) this.sets.delete(this.sets.keys().next().value!)
      set = { expiresAtMs, counts: new Map() }
      this.sets.set(key, set)
    }
    for (const [identity, n] of counts) set.counts.set(identity, (set.counts.get(identity) ?? 0) + n)
    if (set.counts.size > cap) {
      const kept = [...set.counts].sort(byRefusals).slice(0, cap)
      set.counts.clear()
      for (const [identity, n] of kept) set.counts.set(identity, n)
    }
    set.expiresAtMs = expiresAtMs
    return Promise.resolve()
  }

  read(keys: readonly string[]): Promise<[string, number][][]> {
    return Promise.resolve(keys.map((key) => [...(this.live(key)?.counts ?? [])].sort(byRefusals)))
  }

  private live(key: string): TopSet | undefined {
    const set = this.sets.get(key)
    if (set !== undefined && set.expiresAtMs <= this.nowMs()) {
      this.sets.delete(key)
      return undefined
    }
    return set
  }
}
