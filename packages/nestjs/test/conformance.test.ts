import { describeHttpAdapter } from '@tollgate/testkit/http-suite'
import { nestFactory } from './factory'

describeHttpAdapter('nestjs on platform-express', nestFactory('express'))
describeHttpAdapter('nestjs on platform-fastify', nestFactory('fastify'))
