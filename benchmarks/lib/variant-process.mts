/**
 * One benchmark variant in a Node process of its own (benchmarks/lib/isolated.ts starts it): its client
 * and its limiter, measured when the parent asks. An app runs its limiter in its own process; measured
 * in one process beside every other variant, a library would pay for call sites its app never shares.
 *
 * argv: the variant id and the Redis URL. Messages in: `{ durationMs, concurrency }`; out: `'ready'`,
 * then a {@link Measurement} per message (its first error as a string).
 * @module
 */
import { Redis } from 'ioredis'
import { createClient } from 'redis'
import { measure } from './measure'
import { allVariants, type Clients, makeOp } from './variants'

const [id, url] = process.argv.slice(2)
const v = allVariants().find((x) => x.id === id)
if (!v || !url) throw new Error(`usage: variant-process.mts <variant id> <redis url>, not ${id} ${url}`)
const fail = (e: unknown) => process.stderr.write(`${id}: client error: ${String(e)}\n`)

// only the client this variant runs on: the others would be idle connections in its process
let client: unknown
if (v.client === 'ioredis') client = new Redis(url).on('error', fail)
else {
  const options = v.client === 'node-redis-nt' ? { url, commandOptions: { timeout: 0 } } : { url }
  client = await createClient(options).on('error', fail).connect()
}
const op = makeOp(v, { [v.client]: client } as unknown as Clients)

process.on('message', async (m: { durationMs: number; concurrency: number }) => {
  const r = await measure(op, m)
  process.send!({ ...r, firstError: r.firstError === undefined ? undefined : String(r.firstError) })
})
process.on('disconnect', () => process.exit(0))
process.send!('ready')
