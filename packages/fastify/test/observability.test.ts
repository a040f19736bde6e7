import { describeObservability } from '../../testkit/src/observability-suite'
import { fastifyFactory } from './factory'

describeObservability('fastify 5', fastifyFactory)
