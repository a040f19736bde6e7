/**
 * The plugin's warning about a permissive Fastify trustProxy: logged once per process (so this file has
 * no other trustProxy app), with a stable code, and never for a hop count or a proxy list.
 */
import tollgate from '@tollgate/fastify'
import Fastify, { type FastifyServerOptions } from 'fastify'
import fastify4 from 'fastify4'
import type { FastifyConstructor } from '../test/factory'
import { fastifyTestbed, inject } from '../test/helpers'

const { apps, limiter } = fastifyTestbed()

describe('trustProxy warning', () => {
  let warn: jest.SpyInstance
  beforeEach(() => {
    warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
  })
  afterEach(() => warn.mockRestore())

  // The setting is public only through request.ip, so it is read at the first limited request.
  const served = async (
    server: FastifyServerOptions,
    make: FastifyConstructor = Fastify as FastifyConstructor,
  ) => {
    const app = make(server)
    apps.push(app)
    await app.register(tollgate, { limiter: limiter(5) })
    app.get('/', async () => 'ok')
    expect((await inject(app, '/')).statusCode).toBe(200)
  }

  it('a hop count or a proxy list is not warned about', async () => {
    // (Fastify 5 treats a hop count as trusting nothing; its types do not allow one.)
    await served({ trustProxy: 1 as unknown as string })
    await served({ trustProxy: '127.0.0.1' })
    await served({ trustProxy: '127.0.0.1, 10.0.0.0/8' })
    await served({ trustProxy: (address: string) => address === '127.0.0.1' })
    // Fastify 4 still honours a hop count.
    await served({ trustProxy: 1 as unknown as string }, fastify4 as unknown as FastifyConstructor)
    await served({ trustProxy: '127.0.0.1' }, fastify4 as unknown as FastifyConstructor)
    expect(warn).not.toHaveBeenCalled()
  })

  it('trustProxy: true is warned about once, with a stable code', async () => {
    await served({ trustProxy: true }, fastify4 as unknown as FastifyConstructor)
    await served({ trustProxy: true })
    expect(warn).toHaveBeenCalledTimes(1)
    expect(warn.mock.calls[0][0]).toMatch(
      /^\[tollgate\] WARN_TOLLGATE_PERMISSIVE_TRUST_PROXY: Fastify trustProxy: true/,
    )
  })
})
