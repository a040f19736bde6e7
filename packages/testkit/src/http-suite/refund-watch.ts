/** Watching a limiter's refunds, whoever asks for them. */
import type { Decision, RateLimiter } from '@tollgate/core'
import { eventually } from './waiting'

/**
 * Watches a limiter's refunds, whoever asks for them (the adapter or the app), and lets the app give
 * back the latest decision itself: `appRefunds` is a route's `hold`, so the handler refunds its own
 * request before answering (requests are sent one at a time, so the latest decision is this one's).
 */
export function refundWatch(api: RateLimiter) {
  const consume = api.consume.bind(api)
  const refund = api.refund.bind(api)
  let latest: Decision | undefined
  const refunds: Promise<void>[] = []
  api.consume = async (...args) => {
    latest = await consume(...args)
    return latest
  }
  api.refund = (...args) => {
    const done = refund(...args)
    refunds.push(done)
    return done
  }
  return {
    appRefunds: () => api.refund(latest!),
    /** Until `n` refunds were asked for (the adapter's come as the response ends) and all settled. */
    landed: async (n: number) => {
      await eventually(async () => refunds.length >= n, `${n} refunds asked for`)
      await Promise.allSettled(refunds)
    },
  }
}
