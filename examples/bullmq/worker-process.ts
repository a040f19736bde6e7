/**
 * One worker process: `REDIS_URL=redis://… QUEUE=tenant-jobs node --import tsx examples/bullmq/worker-process.ts`.
 * Start several. Each job it runs is logged (and, with `RAN_KEY` set, appended to that Redis list as
 * JSON: tenant, n, time, pid) and each deferral counted (`DEFERRED_KEY`): that is what the test checks.
 */
import { RedisStore } from '@tollgate/core'
import Redis from 'ioredis'
import { tenantLimiter, tenantWorker } from './worker'

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
// An 'error' listener: ioredis logs every failed reconnect otherwise; the failure policy answers meanwhile.
const redis = new Redis(url).on('error', (err) => console.warn('redis:', err.message))
const limiter = tenantLimiter(new RedisStore(redis), process.env.TOLLGATE_PREFIX)
const ranKey = process.env.RAN_KEY
const deferredKey = process.env.DEFERRED_KEY

const worker = tenantWorker({
  queue: process.env.QUEUE ?? 'tenant-jobs',
  connection: { url },
  limiter,
  run: async (job) => {
    const at = Date.now()
    if (ranKey) await redis.rpush(ranKey, JSON.stringify({ ...job.data, id: job.id, at, pid: process.pid }))
    else
      console.log(
        `${new Date(at).toISOString()} pid ${process.pid}: tenant ${job.data.tenant} job ${job.data.n}`,
      )
  },
  onDefer: (job, delayMs) => {
    if (deferredKey) void redis.incr(deferredKey)
    else console.log(`pid ${process.pid}: tenant ${job.data.tenant} job ${job.data.n} deferred ${delayMs} ms`)
  },
})
worker.on('error', (e) => console.error('worker:', e.message))
await worker.waitUntilReady()
// the limiter's own connection too: a job taken before it is up would get the failure policy
if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve))
process.send?.('ready')

const stop = async () => {
  await worker.close()
  redis.disconnect()
  process.exit(0)
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
