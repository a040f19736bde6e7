import { describeHttpAdapter } from '@tollgate/testkit/http-suite'
import { fetchFactory } from './factory'

describeHttpAdapter('fetch handlers on @hono/node-server', fetchFactory)
