/**
 * Block and allow entries on Redis: control.lua sets an identity's entry in its control key (its own
 * slot) and keeps the prefix's index of blocks (one key, for `blocks()`), each in one script.
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
}
