import { MemoryStore, RateLimiter } from '@tollgate/core'
import { createHttpLimiter } from './limiter'
import { FrameworkFacts } from './request-facts'

/** A framework request whose `ip` getter counts its reads (a proxy walk an adapter should not pay for). */
function request(ip: string | undefined) {
  const req = { reads: 0 }
  Object.defineProperty(req, 'ip', {
    get() {
      req.reads++
      return ip
    },
  })
  return req as { reads: number; readonly ip?: string }
}

describe('FrameworkFacts', () => {
  it("reads the request's own ip only when asked, and carries the route", () => {
    const req = request('203.0.113.7')
    const facts = new FrameworkFacts(req, '/users/:id')
    expect(req.reads).toBe(0)
    expect(facts.route).toBe('/users/:id')
    expect(facts.ip).toBe('203.0.113.7')
    expect(req.reads).toBe(1)
    expect(new FrameworkFacts(request(undefined), undefined).ip).toBeUndefined()
  })

  it('lets an adapter whose request has no address say how to find it', () => {
    class HeaderFacts extends FrameworkFacts<{ header: string }> {
      override get ip(): string | undefined {
        return this.req.header
      }
    }
    const facts = new HeaderFacts({ header: '198.51.100.2' }, undefined)
    expect(facts.ip).toBe('198.51.100.2')
    expect(facts.route).toBeUndefined()
  })

  it('the default key reads the address; a key function that ignores it never does', async () => {
    const limiter = new RateLimiter({ store: new MemoryStore(), limit: 5, window: '1m' })
    const byIp = createHttpLimiter({ limiter })
    const req = request('::ffff:192.0.2.1')
    const result = await byIp.check(req, new FrameworkFacts(req, '/a'))
    expect(result?.decision?.policies[0]?.key).toContain('192.0.2.1 /a')
    expect(req.reads).toBe(1)

    const byAccount = createHttpLimiter<{ reads: number }>({ limiter, key: () => 'account:1' })
    const other = request('192.0.2.9')
    expect((await byAccount.check(other, new FrameworkFacts(other, undefined)))?.status).toBe(200)
    expect(other.reads).toBe(0)
  })
})
