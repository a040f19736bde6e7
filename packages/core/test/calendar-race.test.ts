/**
 * Exactness of a calendar window at its period's edge, across OS processes: two children consume from one
 * identity, their attempts spread over 600 ms around a period end placed 300 ms after Redis' TIME, each
 * call also charging a per-second policy in the same script. Whatever the spread met, each period admits
 * at most the limit: the key's count after the round is the new period's admissions (its expiry says
 * which period it holds), the rest were the old period's. On one server and on a 3-primary cluster.
 */
import { join } from 'node:path'
import {
  type RaceHandle,
  type RedisClusterHandle,
  redisUrl,
  respCommand,
  startRace,
  startRedisCluster,
} from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { MemoryStore } from '../src'
import { keySlot } from '../src/stores/redis/cluster-slot'
import { slotOwners } from './cluster-clients'
import { CALENDAR_LIMIT, calendarLimiter, DAY, KEY } from './fixtures/calendar-race-module'

const MODULE = join(__dirname, 'fixtures/calendar-race-module.ts')
const ATTEMPTS = 60 // per child: 120 in all, at least 60 in one period
const ROUNDS = 3

async function redisMs(port: number): Promise<number> {
  const [s, us] = (await respCommand(port, ['TIME'])) as string[]
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

/** The port holding the monthly key of a prefix (the one server, or the cluster's owner of its slot). */
type PortOf = (key: string) => Promise<number>

async function rounds(race: RaceHandle, portOf: PortOf): Promise<void> {
  const seen: string[] = []
  for (let r = 0; r < ROUNDS; r++) {
    const prefix = uniquePrefix('calrace')
    const key = calendarLimiter(new MemoryStore(), prefix).keysFor(KEY)[1]!
    const port = await portOf(key)
    const end = (await redisMs(port)) + 300
    const result = await race.round({ prefix, end, spreadMs: 600 }, ATTEMPTS)
    expect(result.errorSamples).toEqual([])
    const count = Number((await respCommand(port, ['GET', key])) ?? 0)
    const expiry = Number(await respCommand(port, ['PEXPIRETIME', key]))
    // a count that expires at the new period's end is the new period's; else the old one's (or none left)
    const newer = expiry === end + DAY ? count : 0
    const older = result.admitted - newer
    expect(newer).toBeLessThanOrEqual(CALENDAR_LIMIT)
    expect(older).toBeLessThanOrEqual(CALENDAR_LIMIT)
    expect(result.admitted).toBeGreaterThanOrEqual(CALENDAR_LIMIT)
    seen.push(`${older}+${newer}`)
  }
  console.log(`calendar edge race: admitted per round (old+new period) ${seen.join(', ')}`)
}

describe('one server', () => {
  let race: RaceHandle
  const port = Number(new URL(redisUrl()).port)
  beforeAll(async () => {
    race = await startRace({ workers: 2, module: MODULE, setupArgs: { url: redisUrl() } })
  }, 60_000)
  afterAll(async () => {
    await race?.close()
  })
  it('admits at most the limit in each period across the edge', () => rounds(race, async () => port), 120_000)
})

describe('3-primary cluster', () => {
  let cluster: RedisClusterHandle
  let race: RaceHandle
  beforeAll(async () => {
    cluster = await startRedisCluster({ primaries: 3 })
    race = await startRace({ workers: 2, module: MODULE, setupArgs: { nodes: cluster.nodes } })
  }, 90_000)
  afterAll(async () => {
    await race?.close()
    await cluster?.stop()
  })
  it('admits at most the limit in each period across the edge', async () => {
    const owners = await slotOwners(cluster.nodes[0]!.port)
    await rounds(race, async (key) => owners[keySlot(key)]!.port)
  }, 120_000)
})
