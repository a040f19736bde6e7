/**
 * A per-label-combination memo for metric collectors (`@tollgate/prometheus`, `@tollgate/opentelemetry`):
 * nested maps keyed by each label value, so the per-decision path finds its bound counter or attribute
 * object without building a key string or an object. Label values are bounded (limiter names, policy
 * names, outcomes, sources), never identities.
 * @module
 */

/** A memo of values by a fixed number of string labels. */
export class LabelCache<T> {
  private readonly root = new Map<string, unknown>()
  constructor(private readonly make: (labels: readonly string[]) => T) {}

  /** The value for two labels. */
  get2(a: string, b: string): T {
    const m = child(this.root, a) as Map<string, T>
    const v = m.get(b)
    if (v !== undefined) return v
    const made = this.make([a, b])
    m.set(b, made)
    return made
  }

  /** The value for four labels. */
  get4(a: string, b: string, c: string, d: string): T {
    const m = child(child(child(this.root, a), b), c) as Map<string, T>
    const v = m.get(d)
    if (v !== undefined) return v
    const made = this.make([a, b, c, d])
    m.set(d, made)
    return made
  }
}

function child(map: Map<string, unknown>, key: string): Map<string, unknown> {
  const found = map.get(key) as Map<string, unknown> | undefined
  if (found !== undefined) return found
  const made = new Map<string, unknown>()
  map.set(key, made)
  return made
}
