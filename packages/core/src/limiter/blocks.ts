/**
 * Blocks and allow entries at runtime: written to each identity's control key, which every decision
 * script reads with the identity's pairs, so every process applies them on its next call (docs/blocks.md).
 * @module
 */
import { type AllowOptions, type BlockEntry, type BlockOptions, checkControl, MAX_LISTED } from '../controls'
import { InputError } from '../errors'
import { checkIdentity, controlIndexKey, controlKey } from '../keys'
import type { Controls, StoreEntry } from '../types'
import type { Stage } from './stage'
import type { StoreCalls } from './store-calls'

/** The longest identity a block, allow entry or override takes (the indexes keep it as given). */
const MAX_IDENTITY_CHARS = 1024

export class Blocks {
  constructor(
    private readonly controls: Controls | undefined,
    private readonly prefix: string,
    private readonly calls: StoreCalls,
    private readonly entries: (identity: string) => StoreEntry[],
    private readonly stages: readonly Stage[],
  ) {}

  async block(identity: string, options: BlockOptions): Promise<void> {
    const { entries, controls } = this.open(identity, 'block')
    const { forMs, reason } = checkControl(options, 'block')
    const key = controlKey(this.prefix, identity)
    await this.calls.run(entries, () => controls.set(key, 'block', forMs, reason), 'control')
    const index = controlIndexKey(this.prefix)
    await this.calls.run(entries, () => controls.index(index, identity, forMs, reason), 'control')
  }

  async unblock(identity: string): Promise<void> {
    const { entries, controls } = this.open(identity, 'unblock')
    // this process's cached refusals by blocks go at once; other processes keep theirs at most a window
    for (const stage of this.stages) stage.unblocked?.()
    const key = controlKey(this.prefix, identity)
    await this.calls.run(entries, () => controls.set(key, 'block', 0, ''), 'control')
    const index = controlIndexKey(this.prefix)
    await this.calls.run(entries, () => controls.index(index, identity, 0, ''), 'control')
  }

  async allow(identity: string, options: AllowOptions): Promise<void> {
    const { entries, controls } = this.open(identity, 'allow')
    const { forMs } = checkControl(options, 'allow')
    const key = controlKey(this.prefix, identity)
    await this.calls.run(entries, () => controls.set(key, 'allow', forMs, ''), 'control')
  }

  async unallow(identity: string): Promise<void> {
    const { entries, controls } = this.open(identity, 'unallow')
    const key = controlKey(this.prefix, identity)
    await this.calls.run(entries, () => controls.set(key, 'allow', 0, ''), 'control')
  }

  async list(options?: { limit?: number }): Promise<BlockEntry[]> {
    const limit = options?.limit ?? MAX_LISTED
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LISTED) {
      throw new InputError('limit', `an integer from 1 to ${MAX_LISTED}`, limit)
    }
    const controls = this.store('blocks')
    const index = controlIndexKey(this.prefix)
    return this.calls.run([], () => controls.list(index, limit), 'control')
  }

  private open(identity: string, method: string): { entries: StoreEntry[]; controls: Controls } {
    return { entries: this.entries(checkedIdentity(identity)), controls: controlsOf(this.controls, method) }
  }

  private store(method: string): Controls {
    return controlsOf(this.controls, method)
  }
}

/** An identity a block, allow entry or override is set for: an `InputError` before any store command. */
export function checkedIdentity(identity: string): string {
  checkIdentity(identity, 'identity')
  if (identity.length > MAX_IDENTITY_CHARS) {
    throw new InputError('identity', `at most ${MAX_IDENTITY_CHARS} characters`, identity)
  }
  return identity
}

/** The store's control entries, or an `InputError` naming `method` for a store that keeps none. */
export function controlsOf(controls: Controls | undefined, method: string): Controls {
  if (controls === undefined) {
    throw new InputError(method, 'called on a limiter whose store keeps control entries', 'unavailable')
  }
  return controls
}
