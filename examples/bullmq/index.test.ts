import { type ChildProcess, fork } from 'node:child_process'
import path from 'node:path'
import { redisUrl } from '@tollgate/testkit'
import { Queue } from 'bullmq'
import Redis from 'ioredis'
import { trackChild } from '../../packages/testkit/src/cleanup'

const TENANTS = ['acme', 'globex', 'initech']
const PER_TENANT = 15
const WORKERS = 3
const LIMIT = 5 // per tenant in any 1000 ms (worker.ts)
// A job's time is taken in its worker after the admitting reply came back: up to one reply's latency
// after the server's admission time, which is what the sliding log counts.
const SLACK_MS = 150

describe('example: BullMQ workers keeping a per-tenant rate', () => {
  let workers: ChildProcess[] = []
  let redis: Redis
  let queue: Queue
  const id = `${Date.now()}-${process.pid}`
  const env = {
    ...process.env,
    REDIS_URL: redisUrl(),
    QUEUE: `tenant-jobs-${id}`,
    TOLLGATE_PREFIX: `tenant-rate-${id}`,
    RAN_KEY: `ran-${id}`,
    DEFERRED_KEY: `deferred-${id}`,
  }

  beforeAll(async () => {
    redis = new Redis(redisUrl())
    queue = new Queue(env.QUEUE, { connection: { url: redisUrl() } })
    workers = Array.from({ length: WORKERS }, () => {
      const child = fork(path.join(__dirname, 'worker-process.ts'), {
        cwd: path.join(__dirname, '../..'),
        env,
        execArgv: ['--import', 'tsx'],
        stdio: 'inherit',
      })
      trackChild(child)
      return child
    })
    await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))))
  }, 30_000)

  afterAll(async () => {
    await Promise.all(
      workers.map((w) => {
        if (w.exitCode !== null) return Promise.resolve()
        const exited = new Promise((resolve) => w.once('exit', resolve))
        w.kill('SIGTERM')
        return exited
      }),
    )
    await queue.obliterate({ force: true })
    await queue.close()
    await redis.del(env.RAN_KEY, env.DEFERRED_KEY)
    redis.disconnect()
  })

  it(`${TENANTS.length * PER_TENANT} jobs over ${WORKERS} worker processes: every job runs once, never more than ${LIMIT} per tenant in any second`, async () => {
    const jobs = TENANTS.flatMap((tenant) => Array.from({ length: PER_TENANT }, (_, n) => ({ tenant, n })))
    const started = Date.now()
    await queue.addBulk(jobs.map((data) => ({ name: 'call', data })))

    // Wait until every job has run (bounded).
    for (let i = 0; i < 300 && (await redis.llen(env.RAN_KEY)) < jobs.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    const ran = (await redis.lrange(env.RAN_KEY, 0, -1)).map(
      (s) => JSON.parse(s) as { tenant: string; n: number; at: number; pid: number },
    )

    // None lost, none run twice, none failed.
    expect(ran.map((r) => `${r.tenant}/${r.n}`).sort()).toEqual(jobs.map((j) => `${j.tenant}/${j.n}`).sort())
    expect(await queue.getFailedCount()).toBe(0)
    await new Promise((resolve) => setTimeout(resolve, 200)) // the last completions are recorded
    expect(await queue.getCompletedCount()).toBe(jobs.length)

    // The rate holds per tenant across processes: any LIMIT + 1 consecutive runs span a second.
    for (const tenant of TENANTS) {
      const at = ran
        .filter((r) => r.tenant === tenant)
        .map((r) => r.at)
        .sort((a, b) => a - b)
      for (let i = 0; i + LIMIT < at.length; i++)
        expect(at[i + LIMIT]! - at[i]!).toBeGreaterThanOrEqual(1000 - SLACK_MS)
    }
    // 15 jobs at 5 per second: the last batch could not start before 2 s.
    expect(Math.max(...ran.map((r) => r.at)) - started).toBeGreaterThanOrEqual(2000 - SLACK_MS)
    // Refused jobs were deferred (back to the delayed set), not failed; and the work was shared.
    expect(Number(await redis.get(env.DEFERRED_KEY))).toBeGreaterThanOrEqual(
      TENANTS.length * (PER_TENANT - LIMIT),
    )
    expect(new Set(ran.map((r) => r.pid)).size).toBeGreaterThan(1)
  }, 60_000)
})
