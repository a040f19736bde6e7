/**
 * `@tollgate/cli`: the `tollgate` command (see {@link run}). This file only re-exports.
 * @module
 */

export { type Dashboard, type DashboardFlags, startDashboard } from './dashboard'
export { formatDuration, parseHumanDuration } from './format'
export { CliError, HELP, type Io, run, VERSION } from './main'
