/**
 * An app whose client (node-redis, iovalkey, Valkey GLIDE) has no 'error' listener of its own (as written from a quick start)
 * survives Redis going away: the process keeps answering with its failure policy and is decided by
 * Redis again once it returns, without a restart. The same for an app that boots with Redis down and
 * never awaits connect(). A child process each (fixtures/outage-app.ts), so a crash is seen as an exit.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { join } from 'node:path'
import { freePort, type RedisServerHandle, sleepAtLeast as sleep, startRedisServer } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'

const APP = join(__dirname, 'fixtures/outage-app.ts')

interface App {
  child: ChildProcess
  output(): string
  decide(key: string): Promise<{ source: string; allowed: boolean }>
  stop(): void
}

type Kind = 'node-redis' | 'iovalkey' | 'valkey-glide'

async function startApp(url: string, connect: 'await' | 'pending', kind: Kind): Promise<App> {
  const child = fork(APP, [], {
    execArgv: ['--import', 'tsx'],
    env: {
      ...process.env,
      REDIS_URL: url,
      OUTAGE_CONNECT: connect,
      OUTAGE_CLIENT: kind,
      OUTAGE_PREFIX: uniquePrefix('app'),
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  })
  let output = ''
  child.stdout?.on('data', (d) => (output += d))
  child.stderr?.on('data', (d) => (output += d))
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve())
    child.once('exit', (code) => reject(new Error(`the app exited (${code}) before ready:\n${output}`)))
  })
  return {
    child,
    output: () => output,
    decide: (key) =>
      new Promise((resolve, reject) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          reject(new Error(`the app has exited (${child.exitCode ?? child.signalCode}):\n${output}`))
          return
        }
        const onExit = (code: number | null) =>
          reject(new Error(`the app exited (${code}) instead of answering:\n${output}`))
        child.once('exit', onExit)
        child.once('message', (m: any) => {
          child.off('exit', onExit)
          resolve(m)
        })
        child.send({ key })
      }),
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    },
  }
}

/** Decisions every 50 ms until one comes from Redis. */
async function untilFromStore(app: App, withinMs: number): Promise<void> {
  const start = performance.now()
  for (;;) {
    const d = await app.decide('k')
    if (d.source === 'store') return
    expect(d).toMatchObject({ source: 'fallback', allowed: false })
    if (performance.now() - start > withinMs) throw new Error(`not decided by Redis within ${withinMs} ms`)
    await sleep(50)
  }
}

describe.each(['node-redis', 'iovalkey', 'valkey-glide'] as const)(
  'an app whose %s client has no error listener',
  (kind) => {
    let server: RedisServerHandle | undefined
    let app: App | undefined
    afterEach(async () => {
      app?.stop()
      await server?.stop()
    })

    it('Redis killed: the process answers by its failure policy, then by Redis once it is back', async () => {
      server = await startRedisServer()
      app = await startApp(server.url, 'await', kind)
      expect(await app.decide('k')).toMatchObject({ source: 'store', allowed: true })
      await server.kill()
      for (let i = 0; i < 10; i++) {
        expect(await app.decide('k')).toMatchObject({ source: 'fallback', allowed: false })
        await sleep(100)
      }
      await server.start()
      await untilFromStore(app, 15_000)
      expect(app.child.exitCode).toBeNull()
    }, 30_000)

    it('Redis down at boot, connect() never awaited: failure policy until Redis starts, then Redis', async () => {
      const port = await freePort()
      app = await startApp(`redis://127.0.0.1:${port}`, 'pending', kind)
      for (let i = 0; i < 10; i++) {
        expect(await app.decide('k')).toMatchObject({ source: 'fallback', allowed: false })
        await sleep(100)
      }
      server = await startRedisServer({ port })
      await untilFromStore(app, 15_000)
      expect(app.child.exitCode).toBeNull()
    }, 30_000)
  },
)
