/**
 * The `settle` option through Express: the true cost, from a response header or a function, replaces the
 * admission's estimate once the response ends (a streamed one when its stream ends, an abandoned one at
 * close), and the next response's headers show it.
 */
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { rateLimit } from '@tollgate/express'
import { remainingIn, settleLimiters } from '@tollgate/testkit/settle-limiters'
import express from 'express'
import request from 'supertest'

const { tokens, perPolicy } = settleLimiters('express')
const remaining = (res: { headers: Record<string, unknown> }) => remainingIn(res.headers.ratelimit as string)

it('settles from a response header; the next response tells the truth', async () => {
  const { limiter, settled } = tokens()
  const app = express()
  app.use(rateLimit({ limiter, key: () => 'k', cost: 10, settle: { header: 'x-tokens-used' } }))
  app.get('/', (_req, res) => {
    res.set('x-tokens-used', '35').send('ok')
  })
  const first = await request(app).get('/')
  expect(remaining(first)).toBe(90) // the estimate, at admission
  await settled()
  const second = await request(app).get('/')
  expect(remaining(second)).toBe(55) // 100 - 35 - the second request's estimate
})

it('settles from a function, giving back what was not used', async () => {
  const { limiter, settled } = tokens()
  const app = express()
  app.use(rateLimit({ limiter, key: () => 'k', cost: 40, settle: (_req, res) => res.locals.used }))
  app.get('/', (_req, res) => {
    res.locals.used = 5
    res.send('ok')
  })
  await request(app).get('/')
  await settled()
  expect((await limiter.peek('k')).remaining).toBe(95)
})

it('a bad header value keeps the estimate', async () => {
  const { limiter } = tokens()
  const app = express()
  app.use(rateLimit({ limiter, key: () => 'k', cost: 10, settle: { header: 'x-tokens-used' } }))
  app.get('/', (_req, res) => {
    res.set('x-tokens-used', '-3').send('ok')
  })
  await request(app).get('/')
  await request(app).get('/')
  expect((await limiter.peek('k')).remaining).toBe(80)
})

it('rejects a bad settle option at construction', () => {
  const { limiter } = tokens()
  expect(() => rateLimit({ limiter, settle: { header: 'bad header' } })).toThrow(/settle/)
  expect(() => rateLimit({ limiter, settle: 3 as never })).toThrow(/settle/)
})

async function listen(app: express.Express): Promise<{ port: number; close(): Promise<void> }> {
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

it('a streamed response settles when its stream ends', async () => {
  const { limiter, settled } = tokens()
  const app = express()
  app.use(rateLimit({ limiter, key: () => 'k', cost: 10, settle: (_req, res) => res.locals.sent }))
  let step: (() => void) | undefined
  app.get('/', async (_req, res) => {
    res.locals.sent = 0
    res.write('a')
    res.locals.sent += 30
    await new Promise<void>((resolve) => (step = resolve))
    res.locals.sent += 30
    res.end('b')
  })
  const server = await listen(app)
  try {
    const body = new Promise<string>((resolve, reject) => {
      http
        .get({ port: server.port, host: '127.0.0.1', path: '/' }, (res) => {
          let text = ''
          res.on('data', (chunk) => {
            text += chunk
            step?.()
          })
          res.on('end', () => resolve(text))
        })
        .on('error', reject)
    })
    expect(await body).toBe('ab')
    await settled()
    expect((await limiter.peek('k')).remaining).toBe(40)
  } finally {
    await server.close()
  }
})

it('a client that disconnects settles what was sent, at close', async () => {
  const { limiter, settled } = tokens()
  const app = express()
  app.use(rateLimit({ limiter, key: () => 'k', cost: 10, settle: (_req, res) => res.locals.sent }))
  app.get('/', (_req, res) => {
    res.locals.sent = 25
    res.write('partial') // never ended: the client goes away
  })
  const server = await listen(app)
  try {
    await new Promise<void>((resolve, reject) => {
      const req = http.get({ port: server.port, host: '127.0.0.1', path: '/' }, (res) => {
        res.once('data', () => {
          req.destroy()
          resolve()
        })
      })
      req.on('error', () => {})
      req.on('timeout', reject)
    })
    await settled()
    expect((await limiter.peek('k')).remaining).toBe(75)
  } finally {
    await server.close()
  }
})

it('a cost per policy: the cost function and the settle function return records', async () => {
  const { limiter, landed } = perPolicy()
  const app = express()
  app.use(
    rateLimit({
      limiter,
      key: () => 'k',
      cost: (req) => ({ tokens: Number(req.query.estimate) }),
      settle: (_req, res) => ({ tokens: Number(res.get('x-tokens-used')) }),
    }),
  )
  app.get('/', (_req, res) => {
    res.set('x-tokens-used', '50').send('ok')
  })
  const first = await request(app).get('/?estimate=30')
  const tokensLeft = (res: { headers: Record<string, unknown> }) =>
    remainingIn(res.headers.ratelimit as string, 'tokens')
  expect(String(first.headers.ratelimit)).toMatch(/"requests";r=999;/)
  expect(tokensLeft(first)).toBe(70) // 100 - the estimate
  await landed(1)
  const second = await request(app).get('/?estimate=30')
  expect(tokensLeft(second)).toBe(20) // 100 - 50 settled - 30 estimated
  await landed(2)
  const state = await limiter.peek('k', { cost: 0 })
  expect(state.policies.map((p) => p.remaining)).toEqual([998, 0]) // requests 1 each, tokens 50 each
  // the cost function passed the query through unchecked: the app's bug, so a 500 (logged)
  const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined)
  const bad = await request(app).get('/?estimate=-1')
  warn.mockRestore()
  expect(bad.status).toBe(500)
})
