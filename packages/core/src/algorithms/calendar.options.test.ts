/** A calendar window's options: what it takes, and what it refuses at construction, naming the option. */
import { ConfigError, MemoryStore, parseKey, RateLimiter } from '..'

const store = () => new MemoryStore()

describe('calendar window options', () => {
  it('defaults to the fixed window and to UTC, inline or named', () => {
    const inline = new RateLimiter({ store: store(), limit: 5, window: { calendar: 'day' } })
    expect(inline.keysFor('k')[0]).toMatch(/:cd-UTC$/)
    const named = new RateLimiter({
      store: store(),
      policies: { monthly: { limit: 100_000, window: { calendar: 'month', timeZone: 'Europe/Berlin' } } },
    })
    expect(named.keysFor({ monthly: 'acme' })[0]).toMatch(/:monthly:cm-Europe\/Berlin$/)
  })

  it('names the period and zone in the key, which reads back', () => {
    const limiter = new RateLimiter({
      store: store(),
      prefix: 'api',
      policies: {
        weekly: { limit: 7, window: { calendar: 'week', timeZone: 'America/Sao_Paulo' } },
      },
    })
    const [key] = limiter.keysFor({ weekly: 'acme' })
    expect(parseKey(key!)).toEqual({
      prefix: 'api',
      tag: 'acme',
      policy: 'weekly',
      algorithm: 'fixed-window',
      windowMs: 7 * 86_400_000,
      calendar: { unit: 'week', timeZone: 'America/Sao_Paulo' },
    })
  })

  it('takes limits a month of milliseconds would have refused for an epoch window', () => {
    expect(
      () => new RateLimiter({ store: store(), limit: 500_000_000, window: { calendar: 'year' } }),
    ).not.toThrow()
  })

  it.each([
    [{ algorithm: 'sliding-window' }, 'algorithm'],
    [{ algorithm: 'gcra' }, 'algorithm'],
    [{ penalty: { after: 3, block: '1h' } }, 'penalty'],
    [{ reserve: 10 }, 'reserve'],
  ])('refuses %p with a ConfigError naming %s', (extra, option) => {
    const build = () =>
      new RateLimiter({
        store: store(),
        policies: { monthly: { limit: 100, window: { calendar: 'month' }, ...(extra as object) } },
      })
    expect(build).toThrow(ConfigError)
    expect(build).toThrow(`policies.monthly.${option}`)
  })

  it('refuses an unknown period or zone', () => {
    expect(
      () => new RateLimiter({ store: store(), limit: 1, window: { calendar: 'hour' as never } }),
    ).toThrow('window.calendar')
    expect(
      () =>
        new RateLimiter({ store: store(), limit: 1, window: { calendar: 'day', timeZone: 'Nowhere/Land' } }),
    ).toThrow('window.timeZone')
  })
})
