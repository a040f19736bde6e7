import { describeHttpAdapter } from '../../testkit/src/http-suite'
import { fastifyFactory } from './factory'

describeHttpAdapter('fastify 5', fastifyFactory)
