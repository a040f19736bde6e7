import { describeHttpAdapter } from '../../testkit/src/http-suite'
import { fetchFactory } from './factory'

describeHttpAdapter('fetch handlers on @hono/node-server', fetchFactory)
