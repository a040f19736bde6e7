/**
 * The conformance-suite factory for Nest, on either platform: builds the app an `AppSpec` describes in
 * Nest's idiom (one controller whose handlers carry `@RateLimit()` / `@SkipRateLimit()`, the app-wide
 * options as `TollgateModule.forRoot()`, `TollgateGuard` as `APP_GUARD`) and listens on a free loopback port.
 */
import 'reflect-metadata'
import type { Server } from 'node:http'
import {
  All,
  Controller,
  Get,
  HttpCode,
  type INestApplication,
  Module,
  RequestMapping,
  RequestMethod,
  StreamableFile,
} from '@nestjs/common'
import { APP_GUARD, NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import {
  adapterOptions,
  firstHeader,
  loopbackApp,
  nodeBody,
  RouteCalls,
  runRoute,
  trustedProxies,
} from '@tollgate/testkit/http-factory'
import type { AppFactory, AppSpec, SuiteOptions, SuiteRequest } from '@tollgate/testkit/http-suite'
import { RateLimit, SkipRateLimit, TollgateGuard, TollgateModule } from '../src'

export type Platform = 'express' | 'fastify'

function view(req: any): SuiteRequest {
  return { header: (name) => firstHeader(req.headers, name), body: req.body, ip: req.ip }
}

/** Suite options to Tollgate options (the request functions get the suite's view of the request). */
export function toNestOptions(options: SuiteOptions): any {
  return adapterOptions(options, view, (res: any) => res.statusCode)
}

const METHODS: Record<string, RequestMethod> = {
  GET: RequestMethod.GET,
  POST: RequestMethod.POST,
  PUT: RequestMethod.PUT,
  PATCH: RequestMethod.PATCH,
  DELETE: RequestMethod.DELETE,
  OPTIONS: RequestMethod.OPTIONS,
  HEAD: RequestMethod.HEAD,
}

/** A controller with one handler per (route, method), decorated as a Nest app would be. */
function controllerFor(spec: AppSpec, calls: RouteCalls): new () => object {
  class SuiteController {}
  const proto = SuiteController.prototype as unknown as Record<string, unknown>
  spec.routes.forEach((route, i) => {
    const methods = route.method === 'ALL' ? ['ALL'] : [route.method].flat()
    for (const method of methods) {
      const name = `route${i}${method}`
      proto[name] = async () => {
        await runRoute(route, calls)
        if (route.stream) return new StreamableFile(nodeBody(route.stream), { type: 'text/plain' })
        return { ok: true, route: route.path }
      }
      const descriptor = Object.getOwnPropertyDescriptor(proto, name)!
      const decorators: MethodDecorator[] = [
        method === 'ALL'
          ? All(route.path)
          : method === 'GET'
            ? Get(route.path)
            : RequestMapping({ path: route.path, method: METHODS[method] }),
        HttpCode(route.status ?? 200),
      ]
      if (route.options === false) decorators.push(SkipRateLimit())
      else if (route.options) decorators.push(RateLimit(toNestOptions(route.options)))
      for (const decorate of decorators) decorate(proto, name, descriptor)
    }
  })
  Controller()(SuiteController)
  return SuiteController
}

export function nestFactory(platform: Platform): AppFactory {
  return async (spec: AppSpec) => {
    const calls = new RouteCalls()
    const controller = controllerFor(spec, calls)
    class SuiteModule {}
    Module({
      imports: [TollgateModule.forRoot(spec.app ? toNestOptions(spec.app) : undefined)],
      controllers: [controller],
      providers: [{ provide: APP_GUARD, useClass: TollgateGuard }],
    })(SuiteModule)
    const adapter =
      platform === 'express'
        ? new ExpressAdapter()
        : new FastifyAdapter({ trustProxy: trustedProxies(spec.trustProxy) })
    const app: INestApplication = await NestFactory.create(SuiteModule, adapter, {
      logger: false,
      abortOnError: false,
    })
    if (platform === 'express') (app as any).set('trust proxy', spec.trustProxy ?? false)
    try {
      await app.listen(0, '127.0.0.1')
    } catch (error) {
      await app.close().catch(() => undefined)
      throw error
    }
    const server = app.getHttpServer() as Server
    return loopbackApp(server, calls, async () => {
      const closing = app.close()
      server.closeAllConnections()
      await closing
    })
  }
}
