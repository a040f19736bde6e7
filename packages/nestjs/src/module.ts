/**
 * `TollgateModule`: the module-wide limiter options and the per-route limiters `TollgateGuard` reads.
 * @module
 */
import { type DynamicModule, type FactoryProvider, Module, type ModuleMetadata } from '@nestjs/common'
import { DiscoveryModule, DiscoveryService, Reflector } from '@nestjs/core'
import { createHttpLimiter } from '@tollgate/http'
import type { TollgateOptions } from './decorators'
import { TOLLGATE_OPTIONS, TollgateGuard, TollgateRoutes } from './guard'

/** What the module provides under {@link TOLLGATE_OPTIONS}. */
interface ModuleConfig {
  options?: TollgateOptions
  http?: ReturnType<typeof createHttpLimiter>
}

/**
 * Options of `TollgateModule.forRootAsync()`: a factory of the module options, with what it injects.
 * @example
 * TollgateModule.forRootAsync({
 *   imports: [RedisModule],
 *   inject: [REDIS],
 *   useFactory: (redis: RedisClientType) => ({ limiter: new RateLimiter({ store: new RedisStore(redis), limit: 100, window: '1m' }) }),
 * })
 */
export interface TollgateModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Returns the module options (or `undefined`: no module-wide limiter, only `@RateLimit()` routes). */
  useFactory: (...args: any[]) => TollgateOptions | undefined | Promise<TollgateOptions | undefined>
  inject?: FactoryProvider['inject']
}

function configOf(options: TollgateOptions | undefined): ModuleConfig {
  // Built now: a bad option throws ConfigError here, before the app serves anything.
  return options === undefined ? {} : { options, http: createHttpLimiter(options) }
}

function dynamic(
  config: Omit<FactoryProvider, 'provide'>,
  imports: ModuleMetadata['imports'],
): DynamicModule {
  return {
    module: TollgateModule,
    // Global: `APP_GUARD` and `@UseGuards(TollgateGuard)` resolve the guard in the app's own modules.
    global: true,
    imports: [DiscoveryModule, ...(imports ?? [])],
    providers: [
      { provide: TOLLGATE_OPTIONS, ...config } as FactoryProvider,
      {
        provide: TollgateRoutes,
        useFactory: (c: ModuleConfig, reflector: Reflector, discovery: DiscoveryService) =>
          new TollgateRoutes(c, reflector, discovery),
        inject: [TOLLGATE_OPTIONS, Reflector, DiscoveryService],
      },
      TollgateGuard,
    ],
    exports: [TOLLGATE_OPTIONS, TollgateRoutes, TollgateGuard],
  }
}

/**
 * Tollgate for Nest. `forRoot(options)` sets the module-wide limiter: with `TollgateGuard` as `APP_GUARD`
 * every route is limited by it, keyed on the client IP (one budget across routes); `@RateLimit()` gives
 * a controller or handler options of its own (over these), `@SkipRateLimit()` exempts one. `forRoot()`
 * without options limits only the `@RateLimit()` routes. Import it once, in the root module (it is global).
 *
 * @example
 * const redis = createClient({ url: process.env.REDIS_URL }).on('error', (err) => console.warn('redis:', err.message))
 * redis.connect().catch(() => {})
 * const api = new RateLimiter({ store: new RedisStore(redis), prefix: 'api', limit: 100, window: '1m' })
 *
 * @Module({
 *   imports: [TollgateModule.forRoot({ limiter: api })],
 *   providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
 * })
 * export class AppModule {}
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class configured by static forRoot methods
export class TollgateModule {
  /**
   * @param options the module-wide options (`limiter`, or inline limiter options with `store`, and the
   *   shared adapter options); omit for none. Checked here: a bad one throws `ConfigError`.
   */
  static forRoot(options?: TollgateOptions): DynamicModule {
    const config = configOf(options)
    return dynamic({ useFactory: () => config }, [])
  }

  /** The module options from a factory (a config service, a Redis client provider). */
  static forRootAsync(options: TollgateModuleAsyncOptions): DynamicModule {
    return dynamic(
      {
        useFactory: async (...args: unknown[]) => configOf(await options.useFactory(...args)),
        inject: options.inject ?? [],
      },
      options.imports,
    )
  }
}
Module({})(TollgateModule)
