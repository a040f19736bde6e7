import { describeObservability } from '../../testkit/src/observability-suite'
import { fetchFactory } from './factory'

describeObservability('fetch handlers on @hono/node-server', fetchFactory)
