/** The option-mistake table (testkit/option-suite.ts) against `withRateLimit()`: the core's messages, word for word. */
import { withRateLimit } from '@tollgate/fetch'
import { describeOptionMistakes, withRequired } from '@tollgate/testkit/option-suite'

const ip = () => '127.0.0.1'
const handler = () => new Response('ok')
describeOptionMistakes(
  'fetch',
  'http',
  withRequired({ ip }, (options) => withRateLimit(handler, options)),
)
