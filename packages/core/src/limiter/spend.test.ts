/**
 * A refund or settlement takes effect at most once per spend wherever the decision is sent: a copy made
 * with JSON and refunded or settled in another process (or again in this one) adds nothing, whatever the
 * order. Against real Redis, with day-long fixed windows (no boundary to straddle).
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { findRepoRoot, redisUrl } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { nodeRedis } from '../../test/clients'
import { type Decision, RateLimiter, RedisStore } from '../index'

const run = promisify(execFile)
const COPY = join(__dirname, '../../test/fixtures/spend-copy.ts')

type Op = { op: 'refund' | 'settle'; amount?: number }

/** Refunds or settles a JSON copy of `decision` in a child process. */
async function elsewhere(
  { prefix, limit, reserve }: { prefix: string; limit: number; reserve?: number },
  decision: Decision,
  ops: Op[],
): Promise<void> {
  const job = { url: redisUrl(), prefix, limit, reserve, ops, decision: JSON.stringify(decision) }
  const { stdout } = await run(process.execPath, ['--import', 'tsx', COPY, JSON.stringify(job)], {
    cwd: findRepoRoot(),
  })
  expect(stdout).toBe('done')
}

describe('a refund or settlement, once per spend wherever it is sent', () => {
  let client: Awaited<ReturnType<typeof nodeRedis>>
  let store: RedisStore
  beforeAll(async () => {
    client = await nodeRedis()
    store = new RedisStore(client)
  })
  afterAll(async () => {
    await client.quit()
  })

  /** A limiter as the child builds it, and what its key has spent (read by a plain peek). */
  function limiter(limit = 100, reserve?: number) {
    const prefix = uniquePrefix('once')
    const options = { store, prefix, limit, window: '1d' as const, algorithm: 'fixed-window' as const }
    const here = new RateLimiter(reserve ? { ...options, reserve } : options)
    const spent = async (key: string) => limit - (await here.peek(key)).remaining
    return { there: { prefix, limit, reserve }, here, spent }
  }

  it('settle here, then refund a copy there: the settlement stands', async () => {
    const { there, here, spent } = limiter()
    const d = await here.consume('job', { cost: 10 })
    await here.settle(d, 40)
    await elsewhere(there, d, [{ op: 'refund' }])
    expect(await spent('job')).toBe(40)
  })

  it('refund a copy there, then here: given back once', async () => {
    const { there, here, spent } = limiter()
    await here.consume('job', { cost: 10 })
    const d = await here.consume('job', { cost: 10 })
    await elsewhere(there, d, [{ op: 'refund' }])
    await here.refund(d)
    expect(await spent('job')).toBe(10)
  })

  it('refund here, then settle a copy there: the settlement is refused', async () => {
    const { there, here, spent } = limiter()
    const d = await here.consume('job', { cost: 10 })
    await here.refund(d)
    await elsewhere(there, d, [{ op: 'settle', amount: 60 }])
    expect(await spent('job')).toBe(0)
  })

  it('settle twice, in two processes: the first settlement wins', async () => {
    const { there, here, spent } = limiter()
    const d = await here.consume('job', { cost: 10 })
    await elsewhere(there, d, [{ op: 'settle', amount: 25 }])
    await here.settle(d, 60)
    await here.settle(JSON.parse(JSON.stringify(d)), 5)
    expect(await spent('job')).toBe(25)
  })

  it('partial refunds of copies add up to the spend, no more', async () => {
    const { there, here, spent } = limiter()
    await here.consume('job', { cost: 5 })
    const d = await here.consume('job', { cost: 10 })
    await here.refund(d, { cost: 4 })
    await elsewhere(there, d, [
      { op: 'refund', amount: 4 },
      { op: 'refund', amount: 4 },
    ])
    await here.refund(JSON.parse(JSON.stringify(d)))
    expect(await spent('job')).toBe(5)
  })

  it('a reserve draw refunded, then copies settled to 0 and refunded here and there: one unit back', async () => {
    const { there, here } = limiter(10, 10)
    const d = await here.consume('job')
    expect(d.source).toBe('reserve')
    await here.refund(d)
    const copy = JSON.parse(JSON.stringify(d))
    await here.settle(copy, 0)
    await here.refund(copy)
    await elsewhere(there, d, [{ op: 'settle', amount: 0 }, { op: 'refund' }])
    let admitted = 1
    while ((await here.consume('job')).allowed) admitted++
    // the limit, and the one unit given back once
    expect(admitted).toBe(11)
  })

  it('a token whose spend id was altered is refused before the store, naming it', async () => {
    const { here, spent } = limiter()
    const d = await here.consume('job', { cost: 10 })
    await expect(
      here.refund({ ...d, refundToken: { ...d.refundToken!, nonce: 'x}{y' } }),
    ).rejects.toMatchObject({
      name: 'InputError',
      argument: 'decision.refundToken.nonce',
      received: 'x}{y',
    })
    await expect(
      here.settle({ ...d, refundToken: { ...d.refundToken!, seq: 0.5 } }, 1),
    ).rejects.toMatchObject({
      argument: 'decision.refundToken.seq',
      received: 0.5,
    })
    expect(await spent('job')).toBe(10)
  })
})
