/**
 * Block, allow and override entries on Redis: control.lua sets an identity's entry in its control key
 * (its own slot) and keeps the prefix's indexes of blocks and overrides (one key each, for `blocks()` and
 * `overrides.list()`), each in one script.
 * @module
 */
import { CONTROL } from '../../scripts/generated'
import type { ControlEntry, Controls } from '../../types'
import type { ScriptRunner } from './guard'

export class RedisControls implements Controls {
  constructor(private readonly runner: ScriptRunner) {}

  async set(key: string, kind: 'block' | 'allow', forMs: number, reason: string): Promise<void> {
    await this.runner.run(CONTROL, [key], ['set', kind === 'block' ? 'b' : 'a', String(forMs), reason])
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

  async setOverride(key: string, spec: string, ttlMs: number): Promise<void> {
    await this.runner.run(CONTROL, [key], ['oset', spec, String(ttlMs)])
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
