/**
 * Query cost, in two passes over the same operation: the estimate before execution (every field its
 * cost, a list's selection multiplied by its `first`/`last`/`limit` argument) and the actual cost after
 * it (the same field costs, a list's selection counted once per item really returned).
 * @module
 */

import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  GraphQLError,
  type GraphQLField,
  GraphQLIncludeDirective,
  type GraphQLSchema,
  GraphQLSkipDirective,
  getArgumentValues,
  getDirectiveValues,
  getNamedType,
  getNullableType,
  getOperationAST,
  getVariableValues,
  isCompositeType,
  isListType,
  Kind,
  type OperationDefinitionNode,
  SchemaMetaFieldDef,
  type SelectionSetNode,
  TypeMetaFieldDef,
  typeFromAST,
} from 'graphql'
import type { CostOptions, FieldCostInfo } from './options'

/** An operation bound to its schema and coerced variables, ready to be priced. */
export interface PricedOperation {
  readonly schema: GraphQLSchema
  readonly operation: OperationDefinitionNode
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>
  readonly variables: Record<string, unknown>
}

interface Field {
  readonly parent: GraphQLCompositeType
  readonly def: GraphQLField<unknown, unknown>
  readonly nodes: FieldNode[]
}

/** The error every refusal of the estimate step carries: a request error, never a fail-open path. */
export function costError(message: string, code: string, extra: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(message, { extensions: { code, ...extra, http: { status: 400 } } })
}

/** Binds the operation; bad variables or an unknown operation are a GraphQLError. */
export function bindOperation(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  rawVariables: Record<string, unknown> | null | undefined,
): PricedOperation {
  const operation = getOperationAST(document, operationName ?? undefined)
  if (!operation) throw costError('The operation to price was not found in the document.', 'BAD_USER_INPUT')
  const fragments = new Map<string, FragmentDefinitionNode>()
  for (const d of document.definitions)
    if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d)
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], rawVariables ?? {})
  if (coerced.errors) {
    const first = at(coerced.errors, 0)
    throw new GraphQLError(first.message, {
      nodes: first.nodes,
      extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } },
    })
  }
  return { schema, operation, fragments, variables: coerced.coerced }
}

const at = <T>(list: readonly T[], i: number): T => list[i] as T

function included(node: FieldNode | { directives?: FieldNode['directives'] }, vars: Record<string, unknown>) {
  const skip = getDirectiveValues(GraphQLSkipDirective, node, vars)
  if (skip?.if === true) return false
  const include = getDirectiveValues(GraphQLIncludeDirective, node, vars)
  return include?.if !== false
}

function fieldDef(op: PricedOperation, parent: GraphQLCompositeType, name: string) {
  if (name === SchemaMetaFieldDef.name && parent === op.schema.getQueryType()) return SchemaMetaFieldDef
  if (name === TypeMetaFieldDef.name && parent === op.schema.getQueryType()) return TypeMetaFieldDef
  return 'getFields' in parent ? parent.getFields()[name] : undefined
}

/** The selection's fields by response key, fragments flattened (a key selected twice is priced once). */
function collect(
  op: PricedOperation,
  parent: GraphQLCompositeType,
  set: SelectionSetNode,
  into = new Map<string, Field>(),
  seen = new Set<string>(),
): Map<string, Field> {
  for (const s of set.selections) {
    if (!included(s, op.variables)) continue
    if (s.kind === Kind.FIELD) {
      const name = s.name.value
      if (name === '__typename') continue // free: known without resolving anything
      const key = s.alias?.value ?? name
      const known = into.get(key)
      if (known) {
        known.nodes.push(s)
        continue
      }
      const def = fieldDef(op, parent, name)
      if (def) into.set(key, { parent, def, nodes: [s] })
    } else {
      let fragment: FragmentDefinitionNode | undefined
      if (s.kind === Kind.FRAGMENT_SPREAD) {
        if (seen.has(s.name.value)) continue
        seen.add(s.name.value)
        fragment = op.fragments.get(s.name.value)
        if (!fragment) continue
      }
      const cond = (fragment ?? (s as { typeCondition?: FragmentDefinitionNode['typeCondition'] }))
        .typeCondition
      const type = cond ? typeFromAST(op.schema, cond) : parent
      const selectionSet = fragment
        ? fragment.selectionSet
        : (s as { selectionSet: SelectionSetNode }).selectionSet
      if (type && isCompositeType(type)) collect(op, type, selectionSet, into, seen)
    }
  }
  return into
}

function subfields(op: PricedOperation, field: Field): Map<string, Field> | undefined {
  const type = getNamedType(field.def.type)
  if (!isCompositeType(type)) return undefined
  const merged = new Map<string, Field>()
  for (const node of field.nodes) if (node.selectionSet) collect(op, type, node.selectionSet, merged)
  return merged
}

function args(op: PricedOperation, field: Field): Record<string, unknown> {
  return getArgumentValues(field.def, at(field.nodes, 0), op.variables)
}

function ownCost(options: CostOptions, field: Field, a: Record<string, unknown>): number {
  const info: FieldCostInfo = { type: field.parent.name, field: field.def.name, args: a }
  const { fieldCost } = options
  let cost: number | undefined
  if (typeof fieldCost === 'function') cost = fieldCost(info)
  else if (fieldCost && Object.hasOwn(fieldCost, `${info.type}.${info.field}`))
    cost = fieldCost[`${info.type}.${info.field}`]
  cost ??= 1
  if (!Number.isSafeInteger(cost) || cost < 0)
    throw new TypeError(
      `fieldCost for ${info.type}.${info.field} must be a non-negative safe integer, got ${cost}`,
    )
  return cost
}

/** The list size a field's arguments ask for, or the default for a list without one. */
function listSize(options: CostOptions, field: Field, a: Record<string, unknown>): number {
  for (const name of options.listArgs) {
    const n = a[name]
    if (n === undefined || n === null) continue
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
      throw costError(
        `Argument '${name}' of ${field.parent.name}.${field.def.name} must be a non-negative integer to price the query.`,
        'BAD_USER_INPUT',
      )
    return n
  }
  return options.defaultListSize
}

const isList = (field: Field) => isListType(getNullableType(field.def.type))

/**
 * The estimate: each field's cost, plus its selection's cost times the list size for a list. Refuses
 * (GraphQLError) past `maxDepth`, and stops early past `maxCost`.
 */
export function estimateCost(op: PricedOperation, options: CostOptions): number {
  const root = op.schema.getRootType(op.operation.operation)
  if (!root) throw costError('The schema has no root type for this operation.', 'BAD_USER_INPUT')
  const walk = (fields: Map<string, Field>, depth: number): number => {
    if (depth > options.maxDepth)
      throw costError(
        `The query is ${depth} levels deep, more than the ${options.maxDepth} allowed.`,
        'DEPTH_LIMIT_EXCEEDED',
        {
          maxDepth: options.maxDepth,
        },
      )
    let total = 0
    for (const field of fields.values()) {
      const a = args(op, field)
      const children = subfields(op, field)
      const inner = children ? walk(children, depth + 1) : 0
      total += ownCost(options, field, a) + (isList(field) ? listSize(options, field, a) * inner : inner)
      if (!Number.isSafeInteger(total)) total = Number.MAX_SAFE_INTEGER
    }
    return total
  }
  return walk(collect(op, root, op.operation.selectionSet), 1)
}

/**
 * The actual cost of a result: each field present in `data` costs its own cost, its selection is counted
 * once per object really returned (a null or missing field costs its own cost and nothing below it).
 */
export function actualCost(op: PricedOperation, options: CostOptions, data: unknown): number {
  const root = op.schema.getRootType(op.operation.operation)
  if (!root || typeof data !== 'object' || data === null) return 0
  const walk = (fields: Map<string, Field>, value: Record<string, unknown>): number => {
    let total = 0
    for (const [key, field] of fields) {
      if (!Object.hasOwn(value, key)) continue // not resolved for this object's type, or an error cut it
      total += ownCost(options, field, args(op, field))
      const children = subfields(op, field)
      if (children) total += items(value[key], (item) => walk(children, item))
    }
    return total
  }
  const items = (v: unknown, each: (item: Record<string, unknown>) => number): number => {
    if (Array.isArray(v)) return v.reduce<number>((sum, x) => sum + items(x, each), 0)
    return typeof v === 'object' && v !== null ? each(v as Record<string, unknown>) : 0
  }
  return walk(collect(op, root, op.operation.selectionSet), data as Record<string, unknown>)
}
