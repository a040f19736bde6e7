/** Penalty options are validated at construction, naming the option and the value (no Redis needed). */

import { at } from '@tollgate/testkit/checked'
import { MemoryStore, RateLimiter } from './index'

const store = new MemoryStore()

it.each([
  [{ block: '15m', after: 0 }, 'penalty.after'],
  [{ block: '15m', after: 1.5 }, 'penalty.after'],
  [{ after: 3 }, 'penalty.block'],
  [{ block: 'soon' }, 'penalty.block'],
  [{ block: '15m', factor: 0.5 }, 'penalty.factor'],
  [{ block: '15m', factor: Number.NaN }, 'penalty.factor'],
  [{ block: '15m', max: '1m' }, 'penalty.max'],
  [{ block: '15m', within: -1 }, 'penalty.within'],
  [{ block: '15m', forget: 'x' }, 'penalty.forget'],
  [{ block: '15m', lockout: true }, 'penalty.lockout'],
  ['15m', 'penalty'],
])('penalty %j: ConfigError naming %s', (penalty, option) => {
  expect(() => new RateLimiter({ store, limit: 5, window: '15m', penalty: penalty as never })).toThrow(
    expect.objectContaining({ code: 'ERR_TOLLGATE_CONFIG', option }),
  )
  expect(
    () =>
      new RateLimiter({ store, policies: { login: { limit: 5, window: '15m', penalty: penalty as never } } }),
  ).toThrow(expect.objectContaining({ option: `policies.login.${option}` }))
})

it('defaults: after 1, within the window, max = block without growth, 1 day with it', () => {
  const fixed = new RateLimiter({
    store,
    prefix: 'fixed',
    limit: 5,
    window: '15m',
    penalty: { block: '10m' },
  })
  expect(at(fixed.policies, 0).penalty).toEqual({
    after: 1,
    withinMs: 900_000,
    blockMs: 600_000,
    factor: 1,
    maxMs: 600_000,
    forgetMs: 0,
  })
  const growing = new RateLimiter({
    store,
    prefix: 'growing',
    limit: 5,
    window: '15m',
    penalty: { after: 3, block: '10m', factor: 2 },
  })
  expect(at(growing.policies, 0).penalty).toMatchObject({
    after: 3,
    factor: 2,
    maxMs: 86_400_000,
    forgetMs: 86_400_000,
  })
})
