import path from 'node:path'
import {
  NAIVE_RACE_MODULE,
  type RaceHandle,
  type RaceRoundResult,
  redisUrl,
  startRace,
  startRedisCluster,
  startRedisServer,
} from '@tollgate/testkit'
import { createCluster } from 'redis'

const LIMIT = 5
const WORKERS = 4
const PER_WORKER = 50

/** True while a process with this pid exists (signal 0 checks without sending anything). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const roundKey = (name: string, round: number) =>
  `tollgate:testkit:${name}:${process.pid}:${Date.now()}:${round}`

describe('race harness', () => {
  describe('naive GET-then-INCR limiter', () => {
    let race: RaceHandle
    beforeAll(async () => {
      race = await startRace({
        workers: WORKERS,
        module: NAIVE_RACE_MODULE,
        setupArgs: { url: redisUrl(), limit: LIMIT },
      })
    })
    afterAll(() => race?.close())

    it('is caught over-admitting across processes', async () => {
      const rounds: RaceRoundResult[] = []
      for (let round = 0; round < 10; round++) {
        const result = await race.round({ key: roundKey('naive', round) }, PER_WORKER)
        expect(result.errors).toBe(0)
        expect(result.admitted + result.refused).toBe(WORKERS * PER_WORKER)
        expect(result.perWorker).toHaveLength(WORKERS)
        rounds.push(result)
        if (result.admitted > LIMIT) break
      }
      expect(Math.max(...rounds.map((r) => r.admitted))).toBeGreaterThan(LIMIT)
    })
  })

  describe('atomic INCR-then-compare control', () => {
    let race: RaceHandle
    beforeAll(async () => {
      race = await startRace({
        workers: WORKERS,
        module: path.join(__dirname, 'fixtures/atomic-race-module.ts'),
        setupArgs: { url: redisUrl(), limit: LIMIT },
      })
    })
    afterAll(() => race?.close())

    it('admits exactly the limit, so the harness counts right', async () => {
      for (let round = 0; round < 3; round++) {
        const result = await race.round({ key: roundKey('atomic', round) }, PER_WORKER)
        expect(result).toMatchObject({ admitted: LIMIT, refused: WORKERS * PER_WORKER - LIMIT, errors: 0 })
        expect(result.perWorker.reduce((a, b) => a + b, 0)).toBe(LIMIT)
      }
    })
  })

  it('reports a module that fails in setup, with its message', async () => {
    await expect(
      startRace({
        workers: 1,
        module: path.join(__dirname, 'fixtures/no-such-module.ts'),
        timeoutMs: 10_000,
      }),
    ).rejects.toThrow(/no-such-module/)
  })
})

describe('startRedisServer', () => {
  it('kills, restarts empty on the same port, and stops', async () => {
    const server = await startRedisServer()
    try {
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`)
      expect(await server.command('SET', 'k', 'v')).toBe('OK')
      await expect(server.command('NO-SUCH-COMMAND')).rejects.toThrow(/unknown command/)
      expect(await server.command('DEBUG', 'SLEEP', '0')).toBe('OK')

      const firstPid = server.pid
      await server.kill()
      expect(server.running).toBe(false)
      expect(alive(firstPid)).toBe(false)
      await expect(server.command('PING')).rejects.toThrow()

      await server.start()
      expect(server.pid).not.toBe(firstPid)
      expect(await server.command('PING')).toBe('PONG')
      expect(await server.command('EXISTS', 'k')).toBe('0')
      await expect(server.start()).rejects.toThrow(/already running/)
    } finally {
      await server.stop()
    }
    expect(alive(server.pid)).toBe(false)
  })
})

describe('startRedisCluster', () => {
  it('comes up with every slot covered, then stops', async () => {
    const cluster = await startRedisCluster()
    try {
      expect(cluster.nodes).toHaveLength(3)
      expect(cluster.rootNodes.map((n) => n.url)).toEqual(cluster.nodes.map((n) => n.url))
      for (const node of cluster.nodes) {
        const info = await cluster.command(node.port, 'CLUSTER', 'INFO')
        expect(info).toMatch(/cluster_state:ok/)
        expect(info).toMatch(/cluster_slots_ok:16384/)
      }
      // The announced addresses work for a real cluster client: keys on different shards round-trip.
      const client = createCluster({ rootNodes: cluster.rootNodes })
      client.on('error', () => {})
      await client.connect()
      try {
        for (const key of ['a', 'b', 'c', 'd', 'e']) await client.set(key, key.toUpperCase())
        expect(await Promise.all(['a', 'b', 'c', 'd', 'e'].map((k) => client.get(k)))).toEqual([
          'A',
          'B',
          'C',
          'D',
          'E',
        ])
      } finally {
        await client.close()
      }
    } finally {
      await cluster.stop()
    }
    for (const node of cluster.nodes) expect(alive(node.pid)).toBe(false)
  })
})
