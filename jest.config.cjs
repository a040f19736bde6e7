/** Jest runs TypeScript through @swc/jest (no type-check: `pnpm typecheck` does that). */
const transform = {
  // Nest's decorators: legacy decorators with their parameter types, for this package and its example only.
  '/(packages|examples)/nestjs/.+\\.ts$': [
    '@swc/jest',
    {
      jsc: {
        target: 'es2022',
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
      },
      module: { type: 'commonjs' },
    },
  ],
  '^.+\\.(t|j)sx?$': [
    '@swc/jest',
    { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } },
  ],
}
const moduleNameMapper = {
  '^@tollgate/testkit/([\\w-]+)$': '<rootDir>/packages/testkit/src/$1.ts',
  '^@tollgate/core/(internal|observability|scripts)$': '<rootDir>/packages/core/src/entries/$1.ts',
  '^@tollgate/nestjs/websockets$': '<rootDir>/packages/nestjs/src/websockets.ts',
  '^@tollgate/(core|http|express|fastify|hono|fetch|nestjs|testkit|prometheus|opentelemetry|cli|mcp|websocket|graphql)$':
    '<rootDir>/packages/$1/src/index.ts',
}
module.exports = {
  testEnvironment: 'node',
  transform,
  moduleNameMapper,
  testMatch: [
    '<rootDir>/packages/*/src/**/*.test.ts',
    '<rootDir>/packages/*/test/**/*.test.ts',
    '<rootDir>/examples/*/**/*.test.ts',
    '<rootDir>/benchmarks/**/*.test.ts',
    '<rootDir>/smoke/**/*.test.ts',
  ],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  // Nest 12 ships ES modules only, and so do content-disposition 3 and cookie 2 (under Mercurius): compiled
  // to CommonJS like the sources (Jest on Node 20 cannot require them).
  transformIgnorePatterns: ['/node_modules/(?!(\\.pnpm|@nestjs|content-disposition|cookie)/)'],
  globalSetup: '<rootDir>/packages/testkit/src/global-setup.ts',
  globalTeardown: '<rootDir>/packages/testkit/src/global-teardown.ts',
  testTimeout: 60000,
  // the progress file names a hung suite (scripts/test.mjs); without TOLLGATE_JEST_PROGRESS it writes nothing
  reporters: ['default', '<rootDir>/scripts/jest-progress.cjs'],
  // the slow suites first, also on a fresh clone with no timings cached (scripts/jest-sequencer.cjs)
  testSequencer: '<rootDir>/scripts/jest-sequencer.cjs',
  maxWorkers: 3,
}
