/** The client address: forwarded headers only through trusted proxies, IPv6 subnets, IPv4-mapped spellings. */
import { RateLimiter } from '@tollgate/core'
import { freshPrefix, type SuiteContext } from './context'
import { request } from './request'

export function describeClientIp(s: SuiteContext): void {
  const { limiter, start, get } = s
  describe('client IP', () => {
    it('a spoofed X-Forwarded-For from an untrusted peer changes nothing', async () => {
      const api = limiter({ limit: 3, window: '60s' })
      const app = await start({ app: { limiter: api }, routes: [{ method: 'GET', path: '/hello' }] })
      const out: number[] = []
      for (let i = 0; i < 5; i++) {
        out.push((await get(app, '/hello', { 'x-forwarded-for': `203.0.113.${i + 1}` })).status)
      }
      expect(out).toEqual([200, 200, 200, 429, 429])
    })

    it('trusted proxy: 20 addresses of one IPv6 /56 share a budget; the next /56 does not', async () => {
      const api = limiter({ limit: 5, window: '60s' })
      const app = await start({
        trustProxy: 1,
        app: { limiter: api },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const out: number[] = []
      for (let i = 0; i < 20; i++) {
        // 2001:db8:0:1XX::/64 for XX in 00..ff all lie in 2001:db8:0:100::/56.
        const addr = `2001:db8:0:1${(i * 13).toString(16).padStart(2, '0')}:${i}::${i + 1}`
        out.push((await get(app, '/hello', { 'x-forwarded-for': addr })).status)
      }
      expect(out.slice(0, 5)).toEqual([200, 200, 200, 200, 200])
      expect(out.slice(5).every((s) => s === 429)).toBe(true)
      expect((await get(app, '/hello', { 'x-forwarded-for': '2001:db8:0:200::1' })).status).toBe(200)
    })

    it('custom multi-policy keys get the canonical IP: rotating inside one /56 does not escape the ip policy', async () => {
      const login = new RateLimiter({
        store: s.store,
        prefix: freshPrefix(),
        policies: { ip: { limit: 3, window: '60s' }, account: { limit: 100, window: '60s' } },
      })
      const app = await start({
        trustProxy: 1,
        routes: [
          {
            method: 'POST',
            path: '/login',
            options: {
              limiter: login,
              key: (req, info) => ({ ip: info.ip(), account: `email:${req.body?.email}` }),
            },
          },
        ],
      })
      const out: number[] = []
      for (let i = 0; i < 6; i++) {
        const res = await request(app.url, '/login', {
          method: 'POST',
          body: { email: `user${i}@example.com` },
          headers: { 'x-forwarded-for': `2001:db8:0:1${i}::${i + 1}` },
        })
        out.push(res.status)
      }
      expect(out).toEqual([200, 200, 200, 429, 429, 429])
    })

    it('trusted proxy: ipv6Subnet 64 splits what 56 joins', async () => {
      const api = limiter({ limit: 1, window: '60s' })
      const app = await start({
        trustProxy: 1,
        app: { limiter: api, ipv6Subnet: 64 },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      expect((await get(app, '/hello', { 'x-forwarded-for': '2001:db8:0:101::1' })).status).toBe(200)
      expect((await get(app, '/hello', { 'x-forwarded-for': '2001:db8:0:101::2' })).status).toBe(429)
      expect((await get(app, '/hello', { 'x-forwarded-for': '2001:db8:0:102::1' })).status).toBe(200)
    })

    it('trusted proxy: IPv4-mapped spellings of one address share one budget', async () => {
      const api = limiter({ limit: 3, window: '60s' })
      const app = await start({
        trustProxy: 1,
        app: { limiter: api },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const spellings = ['1.2.3.4', '::ffff:1.2.3.4', '::FFFF:102:304', '0:0:0:0:0:ffff:1.2.3.4']
      const out: number[] = []
      for (const addr of spellings) out.push((await get(app, '/hello', { 'x-forwarded-for': addr })).status)
      expect(out).toEqual([200, 200, 200, 429])
      expect((await get(app, '/hello', { 'x-forwarded-for': '1.2.3.5' })).status).toBe(200)
    })

    it('trusted proxy: an unreadable forwarded address is refused with 400, never pooled or passed', async () => {
      const api = limiter({ limit: 3, window: '60s' })
      const app = await start({
        trustProxy: 1,
        app: { limiter: api },
        routes: [{ method: 'GET', path: '/hello' }],
      })
      const res = await get(app, '/hello', { 'x-forwarded-for': 'not-an-ip' })
      expect(res.status).toBe(400)
      expect(app.calls('/hello')).toBe(0)
    })
  })
}
