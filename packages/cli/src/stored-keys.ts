// TEMPORARY: stands in for @tollgate/core's parseKey/keyPattern until the keys change is merged.
import type { Algorithm } from '@tollgate/core'
import { identityTag } from '@tollgate/core/scripts'

const ALG: Record<string, Algorithm> = {
  fw: 'fixed-window',
  sw: 'sliding-window',
  sl: 'sliding-log',
  tb: 'token-bucket',
  gc: 'gcra',
  cc: 'concurrency',
}
const UNIT: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

export interface ParsedKey {
  prefix: string
  tag: string
  policy?: string
  algorithm: Algorithm
  windowMs: number
}

export function parseKey(key: string): ParsedKey | undefined {
  const open = key.indexOf(':{')
  if (open < 1) return undefined
  const close = key.indexOf('}', open)
  if (close < 0 || key[close + 1] !== ':') return undefined
  const prefix = key.slice(0, open)
  const tag = key.slice(open + 2, close)
  const rest = key.slice(close + 2).split(':')
  if (rest.length > 2) return undefined
  const m = /^(fw|sw|sl|tb|gc|cc)-(\d+)(ms|s|m|h|d)$/.exec(rest[rest.length - 1])
  if (!m) return undefined
  return {
    prefix,
    tag,
    ...(rest.length === 2 ? { policy: rest[0] } : {}),
    algorithm: ALG[m[1]],
    windowMs: Number(m[2]) * UNIT[m[3]],
  }
}

const GLOB = /[*?[\]\\]/g

export function keyPattern(prefix: string, identity: string): string {
  return `${prefix.replace(GLOB, '\\$&')}:{${identityTag(identity).replace(GLOB, '\\$&')}}:*`
}
