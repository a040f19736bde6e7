/**
 * Warnings an adapter gives once per process, about settings that weaken the limit without breaking
 * anything (so they are not errors).
 * @module
 */

const warned = new Set<string>()
/** Logs a warning once per process and code (e.g. a permissive trust-proxy setting). */
export function warnOnce(code: string, message: string, log: (line: string) => void = console.warn): void {
  if (warned.has(code)) return
  warned.add(code)
  log(`[tollgate] ${code}: ${message}`)
}

/**
 * The line an app hears when its `key`, `cost`, `limits` or `limiter` function answers a value the limiter
 * refuses (the caller logs it once per middleware and function: every request then repeats it).
 */
export function warnInvalidInput(message: string): void {
  console.warn(
    `[tollgate] ERR_TOLLGATE_INPUT: ${message}. The request was answered 500: fix the function ` +
      '(or throw an InputError from it to answer 400).',
  )
}

/** The warning adapters give for `trust proxy = true` and the like: any client can then pick its IP. */
export function warnPermissiveTrustProxy(setting: string): void {
  warnOnce(
    'WARN_TOLLGATE_PERMISSIVE_TRUST_PROXY',
    `${setting} trusts every X-Forwarded-For hop, so any client can choose the IP it is limited by. ` +
      'Trust only your proxies (a hop count or their addresses).',
  )
}
