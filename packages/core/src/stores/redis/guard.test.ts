/** SCRIPT FLUSH between two calls changes nothing visible: one EVAL re-caches, then EVALSHA again. */

import net from 'node:net'
import { at, type RedisServerHandle, startRedisServer } from '@tollgate/testkit'
import { uniquePrefix } from '@tollgate/testkit/store-suite'
import { RequestError } from '@valkey/valkey-glide'
import Redis, { ReplyError } from 'ioredis'
import { createClient, ErrorReply } from 'redis'
import { glide, nodeRedis, readyIovalkey } from '../../../test/clients'
import * as scripts from '../../entries/scripts'
import { RateLimiter, RedisStore } from '../../index'
import { isGlideNoScript } from './glide-client'
import { isNoScript } from './guard'

function commandCalls(info: string, name: string): number {
  const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)
  return m ? Number(m[1]) : 0
}

describe('NOSCRIPT recovery', () => {
  it('the generated SHA1s are the ones Redis computes', async () => {
    const client = await nodeRedis()
    for (const s of [scripts.CONSUME, scripts.PEEK, scripts.REFUND, scripts.RESET]) {
      expect(await client.scriptLoad(s.source)).toBe(s.sha1)
    }
    await client.quit()
  })

  // A server of its own: SCRIPT FLUSH and the command counters are server-wide, and other test files
  // share the suite's Redis (their re-EVALs would be counted here).
  let own: RedisServerHandle
  beforeAll(async () => {
    own = await startRedisServer()
  })
  afterAll(async () => {
    await own?.stop()
  })

  const KINDS = ['node-redis', 'ioredis', 'iovalkey', 'valkey-glide'] as const
  const cases = KINDS.flatMap((kind) => [
    [kind, 'Redis'],
    [kind, 'Valkey 8'],
  ]) as [(typeof KINDS)[number], 'Redis' | 'Valkey 8'][]

  it.each(cases)('%s: SCRIPT FLUSH mid-stream is invisible (%s NOSCRIPT text)', async (kind, text) => {
    const admin = createClient({ url: own.url }).on('error', () => {})
    await admin.connect()
    // Valkey 8 says "NOSCRIPT No matching script.": a proxy gives the real server's reply that text.
    const proxy = text === 'Valkey 8' ? await valkey8Proxy(own.port) : undefined
    const url = proxy ? `redis://127.0.0.1:${proxy.port}` : own.url
    const client = await connect(kind, url)
    const limiter = new RateLimiter({
      store: new RedisStore(client.raw),
      prefix: uniquePrefix('flush'),
      limit: 5,
      window: '1d',
    })
    expect((await limiter.consume('k')).remaining).toBe(4)
    await admin.scriptFlush()
    await admin.configResetStat()
    expect((await limiter.consume('k')).remaining).toBe(3) // state kept, no error
    expect((await limiter.consume('k')).remaining).toBe(2)
    const info = await admin.info('commandstats')
    expect(commandCalls(info, 'eval')).toBe(1) // one EVAL after NOSCRIPT...
    expect(commandCalls(info, 'evalsha')).toBe(2) // ...then EVALSHA again (the failed one + the next)
    if (proxy) expect(proxy.rewrites).toBe(1) // the client saw Valkey 8's text
    await admin.quit()
    await client.close()
    proxy?.close()
  })

  it('other script errors are not retried and surface as StoreError', async () => {
    const client = await nodeRedis()
    const admin = await nodeRedis()
    await admin.configResetStat()
    const limiter = new RateLimiter({
      store: new RedisStore(client),
      prefix: uniquePrefix('err'),
      limit: 5,
      window: '1m',
    })
    await admin.set(at(limiter.keysFor('k'), 0), 'x')
    // A sliding-window key pre-created as a string is repaired, never admitted as unlimited.
    expect((await limiter.consume('k')).remaining).toBe(4)
    await client.quit()
    await admin.quit()
  })
})

/** A ready client (calls made before its first 'ready' wait for it: see boot.test.ts). */
async function readyRedis(url: string): Promise<Redis> {
  const client = new Redis(url)
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
  return client
}

async function connect(kind: string, url: string): Promise<{ raw: unknown; close(): Promise<void> }> {
  if (kind === 'ioredis' || kind === 'iovalkey') {
    const client = kind === 'ioredis' ? await readyRedis(url) : await readyIovalkey(url)
    return { raw: client, close: async () => client.disconnect() }
  }
  if (kind === 'valkey-glide') {
    const client = await glide(url)
    return { raw: client, close: async () => client.close() }
  }
  const client = await createClient({ url })
    .on('error', () => {})
    .connect()
  return { raw: client, close: async () => void (await client.quit()) }
}

const REDIS_NOSCRIPT = '-NOSCRIPT No matching script. Please use EVAL.'

/** A TCP proxy to `port` that rewrites Redis's NOSCRIPT reply into Valkey 8's. */
async function valkey8Proxy(port: number): Promise<{ port: number; rewrites: number; close(): void }> {
  let rewrites = 0
  const sockets = new Set<net.Socket>()
  const server = net.createServer((down) => {
    const up = net.connect(port, '127.0.0.1')
    sockets.add(down).add(up)
    down.on('data', (d) => up.write(d))
    up.on('data', (d) => {
      const text = d.toString('latin1')
      const out = text.replace(REDIS_NOSCRIPT, '-NOSCRIPT No matching script.')
      if (out !== text) rewrites++
      down.write(out, 'latin1')
    })
    const end = () => {
      down.destroy()
      up.destroy()
    }
    down.on('close', end).on('error', end)
    up.on('close', end).on('error', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    get rewrites() {
      return rewrites
    },
    close: () => {
      for (const s of sockets) s.destroy()
      server.close()
    },
  }
}

describe('NOSCRIPT is recognised by its code, whatever the text', () => {
  const valkey8 = 'NOSCRIPT No matching script.'
  it.each([
    ['node-redis', new ErrorReply(valkey8)],
    ['ioredis / iovalkey', new ReplyError(valkey8)],
    ['@upstash/redis', new Error(`Command failed: ${valkey8}`)],
    ['plain', new Error('NOSCRIPT something else entirely')],
  ])('%s', (_, error) => {
    expect(isNoScript(error)).toBe(true)
  })

  it('Valkey GLIDE: by the error kind its core derives from the code', () => {
    expect(
      isGlideNoScript(
        new RequestError('An error was signalled by the server: - NoScriptError: No matching script.'),
      ),
    ).toBe(true)
    expect(isGlideNoScript(new RequestError(valkey8))).toBe(true)
  })

  it.each([
    'ERR Error running script (call to f_x): @user_script:1: NOSCRIPT inside a message',
    "NOPERM this user has no permissions to run the 'evalsha' command",
    'BUSY Redis is busy running a script',
  ])('not NOSCRIPT: %s', (message) => {
    expect(isNoScript(new ReplyError(message))).toBe(false)
    expect(
      isGlideNoScript(new RequestError(`An error was signalled by the server: - ResponseError: ${message}`)),
    ).toBe(false)
  })
})
