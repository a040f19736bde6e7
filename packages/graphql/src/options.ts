/**
 * The options of `tollgateYoga`, `tollgateApollo` and `tollgateMercurius`, checked once at the call: a bad
 * value is a `ConfigError` naming the option and the value, before any request.
 * @module
 */

import { ConfigError, type KeyInput, type RateLimiter } from '@tollgate/core'
import type { HeaderFormat } from '@tollgate/http'
import type { DocumentNode, FormattedExecutionResult } from 'graphql'

/** What a field-cost function sees: the field's parent type, its name and its coerced arguments. */
export interface FieldCostInfo {
  readonly type: string
  readonly field: string
  readonly args: Readonly<Record<string, unknown>>
}

/** One operation as the limiter sees it: the server's context value and the request's document. */
export interface GraphQLOperation<TContext = any> {
  readonly context: TContext
  readonly document: DocumentNode
  readonly operationName?: string | null
  readonly variables: Readonly<Record<string, unknown>>
}

export interface GraphQLRateLimitOptions<TContext = any> {
  /** The limiter every operation spends from: its policies are the budgets, its failure policy applies. */
  limiter: RateLimiter
  /**
   * The identity an operation spends for. Default: the client IP of the server's request (canonical, an
   * IPv6 masked to its /56), else a shared `'anonymous'` identity (warned once).
   */
  key?: (context: TContext, operation: GraphQLOperation<TContext>) => KeyInput | Promise<KeyInput>
  /**
   * A field's cost, by `'Type.field'` or from a function (`undefined` means the default, 1). Fields not
   * named cost 1; `__typename` costs nothing.
   * @default 1 per field
   */
  fieldCost?: Readonly<Record<string, number>> | ((field: FieldCostInfo) => number | undefined)
  /**
   * How many items a list field is priced at before execution: the first of `args` present on the field,
   * else `default`.
   * @default { args: ['first', 'last', 'limit'], default: 1 }
   */
  listSize?: { args?: readonly string[]; default?: number }
  /** Operations estimated above this are refused before the limiter (`COST_LIMIT_EXCEEDED`). */
  maxCost?: number
  /** Operations nested deeper than this many fields are refused before the limiter (`DEPTH_LIMIT_EXCEEDED`). */
  maxDepth?: number
  /**
   * Your own estimate in place of the field walk; throw a GraphQLError to refuse the operation as invalid.
   */
  estimate?: (
    document: DocumentNode,
    variables: Readonly<Record<string, unknown>>,
    operation: GraphQLOperation<TContext>,
  ) => number | Promise<number>
  /**
   * The actual cost, read from the result: the spend becomes it (`limiter.settle`). `undefined` keeps the
   * estimate. Default: the fields really resolved, lists counted by the items returned; with a custom
   * `estimate` and no `actualCost`, the estimate is kept.
   */
  actualCost?: (
    result: FormattedExecutionResult,
    operation: GraphQLOperation<TContext>,
  ) => number | undefined | Promise<number | undefined>
  /** RateLimit header format on every limited response. @default 'ietf' */
  headers?: HeaderFormat
}

/** The walk's settings with every default applied. */
export interface CostOptions {
  readonly fieldCost: GraphQLRateLimitOptions['fieldCost']
  readonly listArgs: readonly string[]
  readonly defaultListSize: number
  readonly maxDepth: number
}

const isFunction = (v: unknown): v is (...a: never[]) => unknown => typeof v === 'function'
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** Throws ConfigError on the first bad option; returns the walk's settings. */
export function checkOptions(options: unknown): CostOptions {
  if (!isRecord(options)) throw new ConfigError('options', 'an object', options, 'type')
  const o = options
  const limiter = o.limiter as { consume?: unknown; settle?: unknown } | undefined
  if (!isRecord(limiter) || !isFunction(limiter.consume) || !isFunction(limiter.settle))
    throw new ConfigError('limiter', 'a RateLimiter', o.limiter, 'type')
  for (const name of ['key', 'estimate', 'actualCost'] as const) {
    if (o[name] !== undefined && !isFunction(o[name]))
      throw new ConfigError(name, 'a function', o[name], 'type')
  }
  if (o.fieldCost !== undefined && !isFunction(o.fieldCost)) {
    if (!isRecord(o.fieldCost))
      throw new ConfigError('fieldCost', "a record by 'Type.field' or a function", o.fieldCost, 'type')
    for (const [name, n] of Object.entries(o.fieldCost)) {
      if (!/^[_A-Za-z]\w*\.[_A-Za-z]\w*$/.test(name))
        throw new ConfigError('fieldCost', "keys of the form 'Type.field'", name)
      if (!isCount(n)) throw new ConfigError(`fieldCost.${name}`, 'a non-negative safe integer', n)
    }
  }
  let listArgs: readonly string[] = ['first', 'last', 'limit']
  let defaultListSize = 1
  if (o.listSize !== undefined) {
    if (!isRecord(o.listSize))
      throw new ConfigError('listSize', 'an object { args, default }', o.listSize, 'type')
    const { args, default: size } = o.listSize
    if (args !== undefined) {
      if (!Array.isArray(args) || args.some((a) => typeof a !== 'string'))
        throw new ConfigError('listSize.args', 'an array of argument names', args, 'type')
      listArgs = args
    }
    if (size !== undefined) {
      if (!isCount(size)) throw new ConfigError('listSize.default', 'a non-negative safe integer', size)
      defaultListSize = size
    }
  }
  for (const name of ['maxCost', 'maxDepth'] as const) {
    const v = o[name]
    if (v !== undefined && (!isCount(v) || v < 1)) throw new ConfigError(name, 'a positive safe integer', v)
  }
  const headers = o.headers
  if (
    headers !== undefined &&
    headers !== false &&
    !['ietf', 'draft-7', 'draft-6'].includes(headers as string)
  )
    throw new ConfigError('headers', "'ietf', 'draft-7', 'draft-6' or false", headers)
  return {
    fieldCost: o.fieldCost as CostOptions['fieldCost'],
    listArgs,
    defaultListSize,
    maxDepth: (o.maxDepth as number | undefined) ?? Number.MAX_SAFE_INTEGER,
  }
}
