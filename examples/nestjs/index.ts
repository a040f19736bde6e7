/**
 * Tollgate on NestJS, runnable: `REDIS_URL=redis://127.0.0.1:6379 PORT=3000 node --import tsx/esm index.ts`
 * (`PLATFORM=fastify` for @nestjs/platform-fastify; Express by default).
 *
 * - every route: 100 requests per minute per client IP, `TollgateModule.forRoot({ limiter })` with
 *   `TollgateGuard` as the app's guard;
 * - `POST /login`: two policies (per IP and per account), `@RateLimit()` on the handler;
 *   `skipSuccessfulRequests` refunds a successful login, so only failed attempts count;
 * - `GET /health`: `@SkipRateLimit()`;
 * - `/catalog`: a controller kept on @nestjs/throttler (`@Throttle()`), made exact across replicas by
 *   `TollgateThrottlerStorage`: 20 per minute, 5 per minute on `/catalog/search`.
 */
import 'reflect-metadata'
import {
  Body,
  Controller,
  Get,
  HttpCode,
  Module,
  Post,
  Req,
  UnauthorizedException,
  UseGuards,
} from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { Throttle, ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler'
import { type Decision, RateLimiter, RedisStore } from '@tollgate/core'
import {
  RateLimit,
  SkipRateLimit,
  TollgateGuard,
  TollgateModule,
  TollgateThrottlerStorage,
} from '@tollgate/nestjs'
import { createClient } from 'redis'

const PORT = Number(process.env.PORT ?? 3000)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const PREFIX = process.env.TOLLGATE_PREFIX ?? 'example-nestjs'
const PLATFORM = process.env.PLATFORM === 'fastify' ? 'fastify' : 'express'

// Demo data; a real app checks a password hash.
const USERS = new Map([
  ['ada@example.com', 'correct horse'],
  ['bob@example.com', 'battery staple'],
])

// One client for the whole app. It boots without Redis and survives an outage: meanwhile the
// limiters' failure policy answers (here the default, 'allow').
const redis = createClient({ url: REDIS_URL }).on('error', (err) => console.warn('redis:', err.message))
redis.connect().catch(() => {})
const store = new RedisStore(redis)

// Each limiter has a prefix of its own on the store.
const api = new RateLimiter({ store, name: 'api', prefix: `${PREFIX}:api`, limit: 100, window: '1m' })
const login = new RateLimiter({
  store,
  name: 'login',
  prefix: `${PREFIX}:login`,
  policies: {
    ip: { limit: 20, window: '15m' },
    account: { limit: 5, window: '15m', algorithm: 'fixed-window' },
  },
})

/** The email of a login body, normalised; '' when there is none. */
function emailOf(body: unknown): string {
  const email = (body as { email?: unknown } | undefined)?.email
  return typeof email === 'string' ? email.trim().toLowerCase() : ''
}

@Controller()
class AppController {
  @Get('hello')
  hello(@Req() req: { rateLimit?: Decision }) {
    return { hello: 'world', remaining: req.rateLimit?.remaining }
  }

  // Charged before the handler runs (so concurrent guesses cannot all slip through), refunded when the
  // login succeeds. Without an email the account policy is keyed on the IP, never one shared budget.
  @Post('login')
  @HttpCode(200)
  @RateLimit({
    limiter: login,
    key: (req, { ip }) => {
      const email = emailOf(req.body)
      return { ip: `ip:${ip()}`, account: email ? `email:${email}` : `ip:${ip()}` }
    },
    skipSuccessfulRequests: true,
  })
  login(@Body() body: { password?: unknown }) {
    if (USERS.get(emailOf(body)) !== body?.password) throw new UnauthorizedException()
    return { ok: true }
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return { ok: true }
  }
}

// An existing @nestjs/throttler controller: unchanged but for the storage below. It is left to its
// own guard (@SkipRateLimit keeps the app-wide Tollgate limit off it).
@Controller('catalog')
@UseGuards(ThrottlerGuard)
@SkipRateLimit()
class CatalogController {
  @Get()
  list() {
    return { items: ['tea', 'coffee'] }
  }

  @Get('search')
  @Throttle({ default: { limit: 5, ttl: 60_000 } })
  search() {
    return { items: ['tea'] }
  }
}

@Module({
  imports: [
    TollgateModule.forRoot({ limiter: api }),
    ThrottlerModule.forRoot({
      throttlers: [{ limit: 20, ttl: 60_000 }],
      storage: new TollgateThrottlerStorage(store, { prefix: `${PREFIX}:throttler` }),
    }),
  ],
  controllers: [AppController, CatalogController],
  providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
})
class AppModule {}

async function main(): Promise<void> {
  const adapter = PLATFORM === 'fastify' ? new FastifyAdapter() : new ExpressAdapter()
  const app = await NestFactory.create(AppModule, adapter)
  await app.listen(PORT, '127.0.0.1')
  console.log(`listening on http://127.0.0.1:${PORT} (${PLATFORM})`)
  // Close the server first, then the Redis client.
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      app
        .close()
        .then(() => redis.quit())
        .finally(() => process.exit(0))
    })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
