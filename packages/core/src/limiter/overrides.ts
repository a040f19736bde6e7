/**
 * Per-identity overrides at runtime (`limiter.overrides`): written to the identity's control key, which
 * every decision script reads with the identity's pairs, so every process decides its next call under
 * them; and to the prefix's bounded index, which `list()` reads (docs/quotas.md).
 * @module
 */
import { InputError } from '../errors'
import { controlKey, overrideIndexKey } from '../keys'
import {
  checkTtl,
  decodeOverrides,
  encodeOverrides,
  MAX_LISTED_OVERRIDES,
  MAX_OVERRIDES,
  type OverrideEntry,
  type OverrideLimits,
  type OverrideOptions,
  type OverrideTarget,
} from '../overrides'
import { isPattern, MAX_PATTERNS, patternPrefix } from '../patterns'
import type { Controls, StoreEntry } from '../types'
import { checkedIdentity, controlsOf } from './blocks'
import type { Stage } from './stage'
import type { StoreCalls } from './store-calls'

export class Overrides {
  constructor(
    private readonly controls: Controls | undefined,
    private readonly prefix: string,
    private readonly target: OverrideTarget,
    private readonly calls: StoreCalls,
    private readonly entries: (identity: string) => StoreEntry[],
    private readonly stages: readonly Stage[],
  ) {}

  /**
   * Sets `identity`'s limits (replacing any it had), for `ttl` or without end. Every process decides
   * the identity's next call under them, in the same script.
   *
   * @example
   * await api.overrides.set('tenant:acme', { monthly: { limit: 500_000 } }, { ttl: '30d' })
   */
  async set(identity: string, limits: OverrideLimits, options?: OverrideOptions): Promise<void> {
    if (isPattern(identity)) {
      const pattern = patternOf(identity)
      await this.writePattern(
        pattern,
        encodeOverrides(this.target, limits),
        checkTtl(options),
        'overrides.set',
      )
      return
    }
    const { entries, controls } = this.open(identity, 'overrides.set')
    const spec = encodeOverrides(this.target, limits)
    const ttlMs = checkTtl(options)
    // the index first: it refuses an identity past the bound before the override applies anywhere
    const index = overrideIndexKey(this.prefix)
    await this.calls.run(
      entries,
      () => controls.indexOverride(index, identity, spec, ttlMs, MAX_OVERRIDES),
      'control',
    )
    const key = controlKey(this.prefix, identity)
    await this.calls.run(entries, () => controls.setOverride(key, spec, ttlMs), 'control')
    // a refusal this process remembered was made under the old limit
    for (const stage of this.stages) stage.overridden?.()
  }

  /** `identity`'s live overrides, or undefined. */
  async get(identity: string): Promise<OverrideLimits | undefined> {
    if (isPattern(identity)) {
      const pattern = patternOf(identity)
      const held = (await this.patterns('overrides.get')).find((p) => p.pattern === pattern)
      return held && decodeOverrides(held.spec)
    }
    const { entries, controls } = this.open(identity, 'overrides.get')
    const key = controlKey(this.prefix, identity)
    const held = await this.calls.run(entries, () => controls.getOverride(key), 'control')
    return held && decodeOverrides(held.spec)
  }

  /** The live overrides of this prefix, at most `limit` (default and at most 1000), in no particular order. */
  async list(options?: { limit?: number }): Promise<OverrideEntry[]> {
    const limit = options?.limit ?? MAX_LISTED_OVERRIDES
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LISTED_OVERRIDES) {
      throw new InputError('limit', `an integer from 1 to ${MAX_LISTED_OVERRIDES}`, limit)
    }
    const controls = this.store('overrides.list')
    const index = overrideIndexKey(this.prefix)
    // the patterns first (at most MAX_PATTERNS), then the identities' own, up to `limit` in all
    const patterns = (await this.patterns('overrides.list')).map((p) => ({
      identity: `${p.pattern}*`,
      spec: p.spec,
      expiresInMs: p.expiresInMs,
    }))
    const own =
      patterns.length >= limit
        ? []
        : await this.calls.run([], () => controls.listOverrides(index, limit - patterns.length), 'control')
    return [...patterns.slice(0, limit), ...own].map(({ identity, spec, expiresInMs }) => ({
      identity,
      limits: decodeOverrides(spec),
      expiresInMs: expiresInMs < 0 ? Number.POSITIVE_INFINITY : expiresInMs,
    }))
  }

  /** Removes `identity`'s overrides: its next call is decided under the policies' own limits. */
  async delete(identity: string): Promise<void> {
    if (isPattern(identity)) {
      await this.writePattern(patternOf(identity), '', 0, 'overrides.delete')
      return
    }
    const { entries, controls } = this.open(identity, 'overrides.delete')
    for (const stage of this.stages) stage.overridden?.()
    const key = controlKey(this.prefix, identity)
    await this.calls.run(entries, () => controls.setOverride(key, '', 0), 'control')
    const index = overrideIndexKey(this.prefix)
    await this.calls.run(
      entries,
      () => controls.indexOverride(index, identity, '', 0, MAX_OVERRIDES),
      'control',
    )
  }

  private open(identity: string, method: string): { entries: StoreEntry[]; controls: Controls } {
    return { entries: this.entries(checkedIdentity(identity)), controls: controlsOf(this.controls, method) }
  }

  /**
   * Sets (`spec` not '') or removes a pattern, then makes the change seen everywhere (no deadline: a
   * cluster writes a version per slot); refusals this process remembered were made under the old limits.
   */
  private async writePattern(pattern: string, spec: string, ttlMs: number, method: string): Promise<void> {
    const controls = this.store(method)
    const version = await this.calls.run(
      [],
      () => controls.setPattern(this.prefix, pattern, spec, ttlMs, MAX_PATTERNS),
      'control',
    )
    await controls.publishPattern?.(this.prefix, version)
    for (const stage of this.stages) stage.overridden?.()
  }

  /** The prefix's live patterns. */
  private patterns(method: string): Promise<{ pattern: string; spec: string; expiresInMs: number }[]> {
    const controls = this.store(method)
    return this.calls.run([], () => controls.listPatterns(this.prefix), 'control')
  }

  private store(method: string): Controls {
    return controlsOf(this.controls, method)
  }
}

/** A pattern identity's prefix (`tenant:acme:` of `tenant:acme:*`), checked as an identity. */
function patternOf(identity: string): string {
  return patternPrefix(checkedIdentity(identity), 'identity')
}
