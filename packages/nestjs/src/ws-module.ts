/**
 * `TollgateWsModule`: the options `TollgateWsGuard` reads, so gateways can use the guard by its class
 * (`@UseGuards(TollgateWsGuard)`) and inject it for `connect()`.
 * @module
 */
import { type DynamicModule, type FactoryProvider, Module, type ModuleMetadata } from '@nestjs/common'
import { Reflector } from '@nestjs/core'
import { TOLLGATE_WS_OPTIONS, TollgateWsGuard, type TollgateWsOptions } from './ws-guard'

/** Options of `TollgateWsModule.forRootAsync()`: a factory of the guard options, with what it injects. */
export interface TollgateWsModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  useFactory: (...args: any[]) => TollgateWsOptions | Promise<TollgateWsOptions>
  inject?: FactoryProvider['inject']
}

function dynamic(
  options: Omit<FactoryProvider, 'provide'>,
  imports: ModuleMetadata['imports'],
): DynamicModule {
  return {
    module: TollgateWsModule,
    // Global: gateways in any module resolve the guard (one guard, one set of connection leases).
    global: true,
    imports: imports ?? [],
    providers: [
      { provide: TOLLGATE_WS_OPTIONS, ...options } as FactoryProvider,
      {
        provide: TollgateWsGuard,
        // Built here: a bad option throws ConfigError as the app initialises.
        useFactory: (o: TollgateWsOptions, reflector: Reflector) => new TollgateWsGuard(o, reflector),
        inject: [TOLLGATE_WS_OPTIONS, Reflector],
      },
    ],
    exports: [TOLLGATE_WS_OPTIONS, TollgateWsGuard],
  }
}

/**
 * Tollgate for Nest gateways: `forRoot(options)` gives `TollgateWsGuard` its limiters (`connections`,
 * `messages`, `perConnection`, `cost`, `key`). Import it once, in the root module (it is global).
 * @example
 * @Module({ imports: [TollgateWsModule.forRoot({ messages })], providers: [ChatGateway] })
 * export class AppModule {}
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class configured by static forRoot methods
export class TollgateWsModule {
  /** Checked here: a bad option throws `ConfigError`. */
  static forRoot(options: TollgateWsOptions): DynamicModule {
    const guard = new TollgateWsGuard(options)
    return dynamic({ useFactory: () => guard.options }, [])
  }

  /** The guard options from a factory (a config service, a Redis client provider). */
  static forRootAsync(options: TollgateWsModuleAsyncOptions): DynamicModule {
    return dynamic({ useFactory: options.useFactory, inject: options.inject ?? [] }, options.imports)
  }
}
Module({})(TollgateWsModule)
