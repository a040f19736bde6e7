import { describeObservability } from '@tollgate/testkit/observability-suite'
import { fetchFactory } from './factory'

describeObservability('fetch handlers on @hono/node-server', fetchFactory)
