/**
 * Which store failures say the store is unwell, and which only say one key holds data a script could
 * not use. The breaker counts the first kind only: a script error about one key's data must not send
 * every other identity to the failure policy. See docs/failure-modes.md.
 * @module
 */
import { StoreTimeoutError } from './errors'

/**
 * `'store'`: the store cannot serve anyone right now (connection lost or refused, deadline passed, the
 * server busy, loading, out of memory, read-only, a cluster without quorum...), or a failure Tollgate
 * cannot attribute to one key. `'data'`: the server answered, and the answer is an error about what the
 * call's keys hold (a Lua runtime error in the script, WRONGTYPE from a command inside it).
 */
export type StoreFault = 'store' | 'data'

// Error codes of a server that cannot serve anyone, at the start of the reply, or after "<script
// location>: " (Redis 6 wraps a command's error inside "ERR Error running script ...: -OOM ...").
const SERVER_STATE =
  /(?:^|: -?)(?:OOM|BUSY|LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY|NOREPLICAS|MISCONF|NOAUTH|NOPERM|WRONGPASS|NOSCRIPT|MOVED|ASK|UNKILLABLE)\b/
// A reply from a script that ran and failed on its data: Redis 7 tags the script location
// ("... on @user_script:12."), Redis 6 says "Error running script", and WRONGTYPE names a key's type.
const DATA = /@?user_script:\d+|Error running script|(?:^|: )WRONGTYPE\b/

/**
 * Classifies a store failure (a `StoreError` whose `cause` is the client's error, the client's error
 * itself, or a `StoreTimeoutError`). Anything not recognised as a data error counts as `'store'`, so an
 * unknown failure still protects latency through the breaker.
 *
 * @example
 * storeFaultOf(new Error('ERR user_script:1: attempt to compare nil with number')) // 'data'
 * storeFaultOf(new Error('LOADING Redis is loading the dataset in memory'))      // 'store'
 */
export function storeFaultOf(error: unknown): StoreFault {
  if (error instanceof StoreTimeoutError) return 'store'
  const message = messageOf((error as { cause?: unknown } | null)?.cause) ?? messageOf(error)
  if (message === undefined || SERVER_STATE.test(message)) return 'store'
  return DATA.test(message) ? 'data' : 'store'
}

function messageOf(error: unknown): string | undefined {
  const message = (error as { message?: unknown } | null | undefined)?.message
  return typeof message === 'string' ? message : undefined
}
