/** The option-mistake table (testkit/option-suite.ts) against `new RateLimiter()`. */
import { describeOptionMistakes } from '@tollgate/testkit/option-suite'
import { RateLimiter } from '../src'

describeOptionMistakes('RateLimiter', 'core', (options) => new RateLimiter(options as never))
