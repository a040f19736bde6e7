import { describeObservability } from '../../testkit/src/observability-suite'
import { honoFactory } from './factory'

describeObservability('hono on @hono/node-server', honoFactory)
