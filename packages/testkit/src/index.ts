/**
 * Test infrastructure for Tollgate: real redis-server processes and clusters, jest global setup, and a
 * multi-process race harness. (race-worker.ts and naive-race-module.ts are process entry points loaded by
 * path, so they are not re-exported; use {@link NAIVE_RACE_MODULE} for the latter.)
 * @module
 */
export * from './checked'
export * from './chromium'
export * from './cli-run'
export * from './cluster'
export * from './delay-proxy'
export * from './edge-runtimes'
export * from './env'
export * from './example-process'
export * from './fault-proxy'
export { default as globalSetup } from './global-setup'
export { default as globalTeardown } from './global-teardown'
export * from './llm-upstream'
export * from './naive-limiter'
export * from './packages'
export * from './race'
export * from './redis-server'
export * from './registry'
export * from './resp'
export * from './runtimes'
export * from './time'
export * from './upstash-server'
