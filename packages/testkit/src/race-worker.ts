/**
 * The child side of the race harness (see race.ts). Not part of the public API: it is a process entry
 * point, spawned as `node --import tsx race-worker.ts` with an IPC channel.
 * @module
 */
import { pathToFileURL } from 'node:url'
import type { FromWorker, RaceContext, RaceModule, ToWorker } from './race'

let mod: RaceModule | undefined
let ctx: RaceContext = { workerIndex: -1, workers: 0 }

function send(msg: FromWorker): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) resolve()
    else process.send(msg, undefined, {}, () => resolve())
  })
}

function loaded(): RaceModule {
  if (!mod) throw new Error('race module not initialised')
  return mod
}

async function load(file: string): Promise<RaceModule> {
  const ns = (await import(pathToFileURL(file).href)) as Partial<RaceModule> & {
    default?: Partial<RaceModule>
  }
  // A CommonJS-compiled module can surface its exports under `default` when imported from ESM.
  const m = typeof ns.attempt === 'function' ? ns : ns.default
  if (!m || typeof m.setup !== 'function' || typeof m.attempt !== 'function') {
    throw new Error(`${file} must export setup() and attempt()`)
  }
  return m as RaceModule
}

async function go(perWorker: number): Promise<FromWorker> {
  const m = loaded()
  const calls: Promise<boolean>[] = new Array(perWorker)
  // Every attempt starts in this one synchronous loop: same tick, so a client can pipeline them together.
  for (let i = 0; i < perWorker; i++) {
    try {
      calls[i] = Promise.resolve(m.attempt(i, ctx))
    } catch (err) {
      calls[i] = Promise.reject(err)
    }
  }
  const settled = await Promise.allSettled(calls)
  let admitted = 0
  let refused = 0
  let errors = 0
  const samples = new Set<string>()
  for (const s of settled) {
    if (s.status === 'fulfilled' && s.value === true) admitted++
    else if (s.status === 'fulfilled' && s.value === false) refused++
    else {
      errors++
      const reason =
        s.status === 'rejected' ? s.reason : new Error(`attempt resolved ${String(s.value)}, not a boolean`)
      if (samples.size < 5) samples.add(reason instanceof Error ? reason.message : String(reason))
    }
  }
  return { type: 'result', admitted, refused, errors, errorSamples: [...samples] }
}

async function handle(msg: ToWorker): Promise<void> {
  switch (msg.type) {
    case 'init':
      ctx = msg.ctx
      mod = await load(msg.module)
      await mod.setup(msg.setupArgs, ctx)
      await send({ type: 'ready' })
      return
    case 'prepare':
      await loaded().prepare?.(msg.roundArgs, ctx)
      await send({ type: 'prepared' })
      return
    case 'go':
      await send(await go(msg.perWorker))
      return
    case 'close':
      try {
        await mod?.teardown?.()
      } catch (err) {
        console.error(`race worker ${ctx.workerIndex}: teardown failed:`, err)
      } finally {
        await send({ type: 'closed' })
        process.exit(0)
      }
  }
}

process.on('message', (msg: ToWorker) => {
  handle(msg).catch(async (err: unknown) => {
    await send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) })
  })
})

// The parent died or closed the channel: nobody is left to report to.
process.on('disconnect', () => process.exit(1))
