import { describeHttpAdapter } from '@tollgate/testkit/http-suite'
import fastify4 from 'fastify4'
import { fastifyFactory, fastifyFactoryOn } from './factory'

describeHttpAdapter('fastify 5', fastifyFactory)
describeHttpAdapter('fastify 4', fastifyFactoryOn(fastify4 as never))
