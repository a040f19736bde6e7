/**
 * The API's limits, in a module of their own so that the `tollgate` command line reads the same policies
 * as the app (`--config examples/plans/limits.ts`): 10 calls a second for everyone, and a monthly quota
 * in Berlin time whose limit depends on the customer's plan.
 */
import type { RateLimiterOptions } from '@tollgate/core'

export const PLANS = { free: 1_000, pro: 100_000 } as const
export type Plan = keyof typeof PLANS

const limits = {
  prefix: 'example-plans',
  policies: {
    second: { limit: 10, window: '1s' },
    // the pro plan's quota is the policy's own; a free customer's is lowered per request
    monthly: { limit: PLANS.pro, window: { calendar: 'month', timeZone: 'Europe/Berlin' } },
  },
} satisfies Omit<RateLimiterOptions, 'store'>

export default limits
