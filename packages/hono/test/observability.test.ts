import { describeObservability } from '@tollgate/testkit/observability-suite'
import { honoFactory } from './factory'

describeObservability('hono on @hono/node-server', honoFactory)
