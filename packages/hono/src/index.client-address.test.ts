/**
 * The client address the middleware keys on: `getConnInfo`, trusted proxy hops, `clientAddress`.
 */
import { Hono } from 'hono'
import { fakeConnInfo, from, honoTestbed, statuses, TEST_IP } from '../test/helpers'
import { clientAddress, rateLimiter } from './index'

const { limiter } = honoTestbed()

describe('rateLimiter on app.request()', () => {
  describe('client address', () => {
    it('ignores X-Forwarded-For by default: a spoofing client still shares its socket budget', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(3), getConnInfo: fakeConnInfo }))
      app.get('/', (c) => c.text('ok'))
      const out: number[] = []
      for (let i = 0; i < 5; i++) {
        out.push(
          (await app.request('/', from('4.0.0.1', { headers: { 'x-forwarded-for': `9.9.9.${i}` } }))).status,
        )
      }
      expect(out).toEqual([200, 200, 200, 429, 429])
    })

    it('with trustProxy: 1, keys on the rightmost X-Forwarded-For entry', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo, trustProxy: 1 }))
      app.get('/', (c) => c.text('ok'))
      // The proxy (socket 10.0.0.1) appends the real client; whatever the client sent before is ignored.
      const via = (spoofed: string) =>
        from('10.0.0.1', { headers: { 'x-forwarded-for': `${spoofed}, 5.0.0.1` } })
      expect([
        (await app.request('/', via('7.7.7.1'))).status,
        (await app.request('/', via('7.7.7.2'))).status,
        (await app.request('/', via('7.7.7.3'))).status,
      ]).toEqual([200, 200, 429])
      // Another client behind the same proxy has its own budget.
      const other = from('10.0.0.1', { headers: { 'x-forwarded-for': '5.0.0.2' } })
      expect((await app.request('/', other)).status).toBe(200)
    })

    it('with trustProxy: 2, keys on the second entry from the right (or the leftmost if fewer)', async () => {
      let seen: string | undefined
      const app = new Hono()
      app.get('/', (c) => {
        seen = clientAddress(c, fakeConnInfo, 2)
        return c.text('ok')
      })
      const ask = async (xff?: string) => {
        await app.request(
          '/',
          from('10.0.0.2', xff === undefined ? {} : { headers: { 'x-forwarded-for': xff } }),
        )
        return seen
      }
      expect(await ask('1.1.1.1, 2.2.2.2, 3.3.3.3')).toBe('2.2.2.2')
      expect(await ask('2.2.2.2 ,3.3.3.3')).toBe('2.2.2.2')
      expect(await ask('3.3.3.3')).toBe('3.3.3.3')
      expect(await ask()).toBe('10.0.0.2')
      expect(await ask('')).toBe('10.0.0.2')
    })

    it('canonicalises addresses: IPv4-mapped spellings and one IPv6 /56 share a budget', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(3), getConnInfo: fakeConnInfo }))
      app.get('/', (c) => c.text('ok'))
      const v4 = ['6.0.0.1', '::ffff:6.0.0.1', '::FFFF:0600:0001', '[::ffff:6.0.0.1]:443']
      const res4 = []
      for (const ip of v4) res4.push((await app.request('/', from(ip))).status)
      expect(res4).toEqual([200, 200, 200, 429])
      const v6 = ['2001:db8:0:aa01::1', '2001:db8:0:aa02::1', '2001:db8:0:aaff::1', '2001:db8:0:aa10::1']
      const res6 = []
      for (const ip of v6) res6.push((await app.request('/', from(ip))).status)
      expect(res6).toEqual([200, 200, 200, 429])
      expect((await app.request('/', from('2001:db8:0:ab00::1'))).status).toBe(200)
    })

    it('accepts a getConnInfo that returns the address as text', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(1), getConnInfo: (c) => c.req.header(TEST_IP) }))
      app.get('/', (c) => c.text('ok'))
      expect(await statuses(app, '/', 2, from('6.1.0.1'))).toEqual([200, 429])
    })

    it('answers 400 (never a shared bucket) when the address is missing or unreadable', async () => {
      const app = new Hono()
      app.use(rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo }))
      app.get('/', (c) => c.text('ok'))
      const missing = await app.request('/')
      expect(missing.status).toBe(400)
      expect(missing.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
      expect((await missing.json()).status).toBe(400)
      expect((await app.request('/', from('not-an-ip'))).status).toBe(400)
    })
  })
})
