/** The option-mistake table (testkit/option-suite.ts) against `rateLimit()`: the core's messages, word for word. */
import { rateLimit } from '@tollgate/express'
import { describeOptionMistakes } from '@tollgate/testkit/option-suite'

describeOptionMistakes('express', 'http', (options) => rateLimit(options as never))
