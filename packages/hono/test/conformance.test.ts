import { describeHttpAdapter } from '@tollgate/testkit/http-suite'
import { honoFactory } from './factory'

describeHttpAdapter('hono on @hono/node-server', honoFactory)
