/**
 * `@tollgate/cli`: the `tollgate` command (see {@link run}). This file only re-exports.
 * @module
 */
export { CliError, HELP, type Io, run } from './main'
