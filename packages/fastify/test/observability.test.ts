import fastify4 from 'fastify4'
import { describeObservability } from '../../testkit/src/observability-suite'
import { fastifyFactory, fastifyFactoryOn } from './factory'

describeObservability('fastify 5', fastifyFactory)
describeObservability('fastify 4', fastifyFactoryOn(fastify4 as never))
