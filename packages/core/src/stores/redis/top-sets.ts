/**
 * The top sets on Redis: top.lua adds a limiter's counted refusals to a capped sorted set per policy
 * and period, and reads a policy's sets back, each in one script on the one slot they share.
 * @module
 */
import { TOP } from '../../scripts/generated'
import type { TopSets } from '../../types'
import type { ScriptRunner } from './guard'

export class RedisTopSets implements TopSets {
  constructor(private readonly runner: ScriptRunner) {}

  async add(
    key: string,
    cap: number,
    expiresAtMs: number,
    counts: ReadonlyMap<string, number>,
  ): Promise<void> {
    const args = ['add', String(cap), String(expiresAtMs)]
    for (const [identity, n] of counts) args.push(identity, String(n))
    await this.runner.run(TOP, [key], args)
  }

  async read(keys: readonly string[]): Promise<[string, number][][]> {
    const reply = (await this.runner.run(TOP, [...keys], ['read'])) as unknown[][]
    return reply.map((flat) => {
      const pairs: [string, number][] = []
      for (let i = 0; i + 1 < flat.length; i += 2) pairs.push([String(flat[i]), Number(flat[i + 1])])
      return pairs
    })
  }
}
