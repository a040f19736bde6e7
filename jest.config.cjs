/** Jest runs TypeScript through @swc/jest (no type-check: `pnpm typecheck` does that). */
const transform = {
  '^.+\\.(t|j)sx?$': [
    '@swc/jest',
    { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } },
  ],
}
const moduleNameMapper = {
  '^@tollgate/core/(http|observability|scripts)$': '<rootDir>/packages/core/src/entries/$1.ts',
  '^@tollgate/(core|express|fastify|hono|fetch|testkit|prometheus|opentelemetry|cli)$':
    '<rootDir>/packages/$1/src/index.ts',
}
module.exports = {
  testEnvironment: 'node',
  transform,
  moduleNameMapper,
  testMatch: [
    '<rootDir>/packages/*/test/**/*.test.ts',
    '<rootDir>/examples/*/**/*.test.ts',
    '<rootDir>/benchmarks/**/*.test.ts',
    '<rootDir>/smoke/**/*.test.ts',
  ],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  globalSetup: '<rootDir>/packages/testkit/src/global-setup.ts',
  globalTeardown: '<rootDir>/packages/testkit/src/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
}
