/**
 * Block, allow and override entries on Redis: control.lua sets an identity's entry in its control key
 * (its own slot) and keeps the prefix's indexes of blocks and overrides (one key each, for `blocks()` and
 * `overrides.list()`), each in one script.
 * @module
 */
import { type PatternTable, patternCounterKey, patternTableKey, slotVersionKey } from '../../patterns'
import { CONTROL } from '../../scripts/generated'
import type { ControlEntry, Controls } from '../../types'
import { SLOTS } from './cluster-slot'
import type { ScriptRunner } from './guard'

export class RedisControls implements Controls {
  /**
   * @param cluster a cluster client: a pattern change is copied to every slot's version key
   * @param tableOf this store's copy of a prefix's patterns, reloaded after a change it makes
   * @param copyOf the copy of an identity's control key that compact pairs read on a cluster (in their
   *   bucket's slot), written with it
   */
  constructor(
    private readonly runner: ScriptRunner,
    private readonly cluster = false,
    private readonly tableOf?: (prefix: string) => PatternTable,
    private readonly copyOf?: (key: string) => Promise<string>,
  ) {}

  /** Runs a write of an identity's control key on it and, on a compact cluster, on its copy. */
  private async write(key: string, args: string[]): Promise<void> {
    if (this.copyOf === undefined) {
      await this.runner.run(CONTROL, [key], args)
      return
    }
    const copy = await this.copyOf(key)
    await Promise.all([this.runner.run(CONTROL, [key], args), this.runner.run(CONTROL, [copy], args)])
  }

  async setPattern(
    prefix: string,
    pattern: string,
    spec: string,
    ttlMs: number,
    max: number,
  ): Promise<number> {
    const keys = [patternTableKey(prefix), patternCounterKey(prefix)]
    return Number(await this.runner.run(CONTROL, keys, ['pset', pattern, spec, String(ttlMs), String(max)]))
  }

  async publishPattern(prefix: string, version: number): Promise<void> {
    if (this.cluster) {
      // each slot's copy, so a call in any slot reads the version in its own slot; resolved once all are
      const v = String(version)
      const writes: Promise<unknown>[] = []
      for (let slot = 0; slot < SLOTS; slot++) {
        writes.push(this.runner.run(CONTROL, [slotVersionKey(prefix, slot)], ['pver', v]))
      }
      await Promise.all(writes)
    }
    const table = this.tableOf?.(prefix)
    if (table) await this.load(table)
  }

  async listPatterns(prefix: string): Promise<{ pattern: string; spec: string; expiresInMs: number }[]> {
    const { nowMs, entries } = readPatterns(
      await this.runner.run(CONTROL, [patternTableKey(prefix), patternCounterKey(prefix)], ['pload']),
    )
    return entries.map(([pattern, value]) => {
      const bar = value.indexOf('|')
      const ends = Number(value.slice(0, bar))
      return { pattern, spec: value.slice(bar + 1), expiresInMs: ends > 0 ? Math.max(0, ends - nowMs) : -1 }
    })
  }

  /** Reloads a table from Redis (a call found it stale, or this process changed it). */
  load(table: PatternTable): Promise<void> {
    table.loading ??= this.runner
      .run(CONTROL, [table.tableKey, table.counterKey], ['pload'])
      .then((reply) => {
        const { version, entries } = readPatterns(reply)
        table.load(version, entries)
      })
      .finally(() => {
        table.loading = undefined
      })
    return table.loading
  }

  set(key: string, kind: 'block' | 'allow', forMs: number, reason: string): Promise<void> {
    return this.write(key, ['set', kind === 'block' ? 'b' : 'a', String(forMs), reason])
  }

  async index(indexKey: string, identity: string, forMs: number, reason: string): Promise<void> {
    await this.runner.run(CONTROL, [indexKey], ['index', identity, String(forMs), reason])
  }

  async list(indexKey: string, max: number): Promise<ControlEntry[]> {
    const flat = (await this.runner.run(CONTROL, [indexKey], ['list', String(max)])) as unknown[]
    const out: ControlEntry[] = []
    for (let i = 0; i + 2 < flat.length; i += 3) {
      out.push({ identity: String(flat[i]), expiresInMs: Number(flat[i + 1]), reason: String(flat[i + 2]) })
    }
    return out
  }

  setOverride(key: string, spec: string, ttlMs: number): Promise<void> {
    return this.write(key, ['oset', spec, String(ttlMs)])
  }

  async getOverride(key: string): Promise<{ spec: string; expiresInMs: number } | undefined> {
    const v = (await this.runner.run(CONTROL, [key], ['oget'])) as unknown[]
    return v.length === 2 ? { spec: String(v[0]), expiresInMs: Number(v[1]) } : undefined
  }

  async indexOverride(
    indexKey: string,
    identity: string,
    spec: string,
    ttlMs: number,
    max: number,
  ): Promise<void> {
    await this.runner.run(CONTROL, [indexKey], ['oindex', identity, spec, String(ttlMs), String(max)])
  }

  async listOverrides(
    indexKey: string,
    max: number,
  ): Promise<{ identity: string; spec: string; expiresInMs: number }[]> {
    const flat = (await this.runner.run(CONTROL, [indexKey], ['olist', String(max)])) as unknown[]
    const out: { identity: string; spec: string; expiresInMs: number }[] = []
    for (let i = 0; i + 2 < flat.length; i += 3) {
      out.push({ identity: String(flat[i]), expiresInMs: Number(flat[i + 1]), spec: String(flat[i + 2]) })
    }
    return out
  }
}

/** control.lua's 'pload' reply: the version, the server's time, then each pattern and its stored value. */
function readPatterns(reply: unknown): { version: number; nowMs: number; entries: [string, string][] } {
  const flat = reply as unknown[]
  const entries: [string, string][] = []
  for (let i = 2; i + 1 < flat.length; i += 2) entries.push([String(flat[i]), String(flat[i + 1])])
  return { version: Number(flat[0]), nowMs: Number(flat[1]), entries }
}
