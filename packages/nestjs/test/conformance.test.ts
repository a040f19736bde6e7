import { describeHttpAdapter } from '../../testkit/src/http-suite'
import { nestFactory } from './factory'

describeHttpAdapter('nestjs on platform-express', nestFactory('express'))
describeHttpAdapter('nestjs on platform-fastify', nestFactory('fastify'))
