import { describeHttpAdapter } from '../../testkit/src/http-suite'
import { honoFactory } from './factory'

describeHttpAdapter('hono on @hono/node-server', honoFactory)
