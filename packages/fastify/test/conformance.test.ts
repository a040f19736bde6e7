import fastify4 from 'fastify4'
import { describeHttpAdapter } from '../../testkit/src/http-suite'
import { fastifyFactory, fastifyFactoryOn } from './factory'

describeHttpAdapter('fastify 5', fastifyFactory)
describeHttpAdapter('fastify 4', fastifyFactoryOn(fastify4 as never))
