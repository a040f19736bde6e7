/**
 * What the scale benchmarks share: driving N identities through a limiter with a bounded number of calls
 * in flight, and reading Redis' memory once it holds still.
 * @module
 */

/** One call of a variant for one identity. */
export type Hit = (id: string) => Promise<unknown>

/** A client that sends a raw command (node-redis' `sendCommand`). */
export interface Sender {
  sendCommand(args: string[]): Promise<unknown>
}

/**
 * n distinct client IPs, 127.a.b.c, from a fixed seed (lengths vary like real addresses). The low 24 bits
 * of this LCG run through all 2^24 values before repeating: up to 16M distinct, each list a prefix of the
 * next, so every scale and every bench drives the same identities.
 */
export function identities(n: number): string[] {
  const seen = new Set<string>()
  let x = 0x9e3779b9
  while (seen.size < n) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    seen.add(`127.${(x >>> 16) & 255}.${(x >>> 8) & 255}.${x & 255}`)
  }
  return [...seen]
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** `hit` for every id, at most `width` in flight. */
export async function pool(ids: readonly string[], hit: Hit, width: number): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < ids.length) await hit(ids[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(width, ids.length) }, worker))
}

/** INFO memory's used_memory, in bytes. */
export async function usedMemory(client: Sender): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(String(await client.sendCommand(['INFO', 'memory'])))![1])
}

/**
 * used_memory once Redis has finished rehashing: the dicts grow in steps, and a half-done rehash holds
 * both tables (DEBUG is enabled for local clients).
 */
export async function settledMemory(client: Sender): Promise<number> {
  let last = await usedMemory(client)
  for (let i = 0; i < 40; i++) {
    await sleep(250)
    const now = await usedMemory(client)
    const rehashing = /rehashing target/.test(String(await client.sendCommand(['DEBUG', 'HTSTATS', '0'])))
    if (now === last && !rehashing) return now
    last = now
  }
  return last
}

/** Scripts run so far (EVALSHA and EVAL): a drive's decisions over its scripts is its batches' size. */
export async function scriptsRun(client: Sender): Promise<number> {
  const info = String(await client.sendCommand(['INFO', 'commandstats']))
  const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
  return calls('evalsha') + calls('eval')
}
