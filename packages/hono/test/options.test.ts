/** The option-mistake table (testkit/option-suite.ts) against `rateLimiter()`: the core's messages, word for word. */
import { rateLimiter } from '@tollgate/hono'
import { describeOptionMistakes, withRequired } from '@tollgate/testkit/option-suite'

const getConnInfo = () => '127.0.0.1'
describeOptionMistakes('hono', 'http', withRequired({ getConnInfo }, rateLimiter))
