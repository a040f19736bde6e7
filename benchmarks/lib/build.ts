/**
 * Which Tollgate a benchmark runs. Users run the built packages (`dist/`, compiled by tsdown); the
 * workspace's `@tollgate/*` resolve to the TypeScript sources, which tsx compiles on the fly with
 * esbuild's `keepNames` (an `Object.defineProperty` for every function created, closures per call
 * included), work users never pay, so the sources would understate Tollgate. The peers run from their
 * published JavaScript. So the benchmarks run the build:
 * `pnpm build`, then `pnpm bench:run benchmarks/<name>.mts` (= `TSX_TSCONFIG_PATH=benchmarks/tsconfig.dist.json
 * node --conditions=tollgate-dist --import tsx …`: the condition picks each package's `dist/`, and the
 * tsconfig drops the workspace's path mapping to the sources, which tsx would otherwise follow). `pnpm
 * bench`, `bench:core` and `bench:http` do both; every report says which Tollgate it measured.
 * @module
 */

/** The `--conditions` flag that selects the built packages (each package's `exports` has the condition). */
export const DIST_CONDITION = '--conditions=tollgate-dist'

/** True when `@tollgate/core` resolves to its build. */
export const runsBuild: boolean = import.meta.resolve('@tollgate/core').includes('/dist/')

/** For the reports' header. */
export const TOLLGATE_BUILD: string = runsBuild
  ? 'Tollgate from its build (`dist/`, as published)'
  : 'Tollgate from its TypeScript sources through tsx (not the build: `pnpm build`, then `pnpm bench:run`)'

/** The flags a child Node process needs to run the same Tollgate as this one. */
export const childConditions: string[] = runsBuild ? [DIST_CONDITION] : []
