import { describeObservability } from '@tollgate/testkit/observability-suite'
import fastify4 from 'fastify4'
import { fastifyFactory, fastifyFactoryOn } from './factory'

describeObservability('fastify 5', fastifyFactory)
describeObservability('fastify 4', fastifyFactoryOn(fastify4 as never))
