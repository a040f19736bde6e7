/**
 * Which requests share a budget: the middleware's scope and the route templates Hono matched.
 */
import { type Context, Hono } from 'hono'
import { rateLimiter } from '../src'
import { fakeConnInfo, from, honoTestbed, identity, statuses } from './helpers'

const { limiter } = honoTestbed()

describe('rateLimiter on app.request()', () => {
  describe('scope and route templates', () => {
    const handler = (c: Context) => c.text(c.req.path)

    it("app.use('/api/*') is app-wide by default: every route under it shares the address's budget", async () => {
      const app = new Hono()
      app.use('/api/*', rateLimiter({ limiter: limiter(3), getConnInfo: fakeConnInfo }))
      app.get('/api/a', handler)
      app.get('/api/b/:id', handler)
      app.post('/api/c', handler)
      const out = [
        (await app.request('/api/a', from('7.0.0.1'))).status,
        (await app.request('/api/b/1', from('7.0.0.1'))).status,
        (await app.request('/api/c', from('7.0.0.1', { method: 'POST' }))).status,
        (await app.request('/api/b/2', from('7.0.0.1'))).status,
      ]
      expect(out).toEqual([200, 200, 200, 429])
    })

    it('on a method route, keys on the route template: params and methods share, routes do not', async () => {
      const app = new Hono()
      const mw = rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo })
      app.get('/users/:id', mw, handler)
      app.post('/users/:id', mw, handler)
      app.get('/posts/:id', mw, handler)
      const ip = '7.0.0.2'
      expect([
        (await app.request('/users/1', from(ip))).status,
        (await app.request('/users/2', from(ip))).status,
        (await app.request('/users/3?x=1', from(ip))).status,
        (await app.request('/users/4', from(ip, { method: 'HEAD' }))).status, // HEAD is GET's budget
      ]).toEqual([200, 200, 429, 429])
      // POST /users/:id is the same route template: the method never gives a budget of its own.
      expect((await app.request('/users/1', from(ip, { method: 'POST' }))).status).toBe(429)
      expect((await app.request('/posts/1', from(ip))).status).toBe(200)
    })

    it('the route template includes the base path of a mounted sub-app', async () => {
      const keys: (string | undefined)[] = []
      const sub = new Hono()
      const mw = rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo })
      sub.get('/items/:id', mw, (c) => {
        keys.push(identity(c))
        return c.text('ok')
      })
      const app = new Hono().route('/v1', sub)
      await app.request('/v1/items/42', from('7.0.0.3'))
      expect(keys).toEqual(['7.0.0.3 /v1/items/:id'])
    })

    it("scope: 'route' under app.use gives each handler's template its own budget", async () => {
      const app = new Hono()
      app.use('/api/*', rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo, scope: 'route' }))
      app.get('/api/users/:id', (c) => c.text(identity(c) ?? ''))
      app.get('/api/posts/:id', handler)
      const ip = '7.0.0.4'
      const first = await app.request('/api/users/1', from(ip))
      expect(await first.text()).toBe('7.0.0.4 /api/users/:id')
      expect((await app.request('/api/users/2', from(ip))).status).toBe(200)
      expect((await app.request('/api/users/3', from(ip))).status).toBe(429)
      expect((await app.request('/api/posts/1', from(ip))).status).toBe(200)
      // No handler matched: the mount pattern is the budget (404 scans are limited together).
      expect(await statuses(app, '/api/nothing', 3, from(ip))).toEqual([404, 404, 429])
    })

    it("scope: 'app' on a method route shares one budget across routes", async () => {
      const app = new Hono()
      const mw = rateLimiter({ limiter: limiter(2), getConnInfo: fakeConnInfo, scope: 'app' })
      app.get('/a', mw, handler)
      app.get('/b', mw, handler)
      const ip = '7.0.0.5'
      expect([
        (await app.request('/a', from(ip))).status,
        (await app.request('/b', from(ip))).status,
        (await app.request('/a', from(ip))).status,
      ]).toEqual([200, 200, 429])
    })

    it('app.all counts as app-wide unless scope says otherwise', async () => {
      const keys: (string | undefined)[] = []
      const app = new Hono()
      app.all('/x/:id', rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo }), (c) => {
        keys.push(identity(c))
        return c.text('ok')
      })
      app.all(
        '/y/:id',
        rateLimiter({ limiter: limiter(5), getConnInfo: fakeConnInfo, scope: 'route' }),
        (c) => {
          keys.push(identity(c))
          return c.text('ok')
        },
      )
      await app.request('/x/1', from('7.0.0.6'))
      await app.request('/y/1', from('7.0.0.6', { method: 'DELETE' }))
      expect(keys).toEqual(['7.0.0.6', '7.0.0.6 /y/:id'])
    })
  })
})
