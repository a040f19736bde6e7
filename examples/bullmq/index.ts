/**
 * The demo: enqueues 20 jobs for each of two tenants and starts three worker processes. Every tenant runs
 * at 5 jobs per second at most, whichever worker picks its jobs; refused jobs wait in BullMQ's delayed set.
 * `REDIS_URL` (default redis://127.0.0.1:6379).
 */
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Queue, QueueEvents } from 'bullmq'

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const queueName = `tenant-jobs-demo-${process.pid}`
const workerFile = fileURLToPath(new URL('./worker-process.ts', import.meta.url))
const workers = [0, 1, 2].map(() =>
  fork(workerFile, {
    env: { ...process.env, REDIS_URL: url, QUEUE: queueName },
    execArgv: ['--import', 'tsx'],
  }),
)
await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))))

const queue = new Queue(queueName, { connection: { url } })
const events = new QueueEvents(queueName, { connection: { url } })
await events.waitUntilReady()
const jobs = ['acme', 'globex'].flatMap((tenant) => Array.from({ length: 20 }, (_, n) => ({ tenant, n })))
const started = Date.now()
let done = 0
const all = new Promise<void>((resolve) =>
  events.on('completed', () => {
    if (++done === jobs.length) resolve()
  }),
)
await queue.addBulk(jobs.map((data) => ({ name: 'call', data, opts: { removeOnComplete: true } })))
await all
console.log(
  `${jobs.length} jobs in ${Date.now() - started} ms: 20 per tenant at 5 per second takes a bit over 3 s`,
)
for (const w of workers) w.kill('SIGTERM')
await queue.obliterate({ force: true })
await Promise.all([queue.close(), events.close()])
