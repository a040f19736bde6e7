/**
 * What every command shares: where it writes, and the one error type it turns into a message and an
 * exit code.
 * @module
 */

/** Where the command writes: `out` for the answer (stdout), `err` for errors and warnings (stderr). */
export interface Io {
  out(line: string): void
  err(line: string): void
  /** `out` is a terminal: `top --watch` redraws in place. */
  tty?: boolean
}

/** A usage or environment error: printed as one line, exit code 2 (usage) or 1 (environment). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message)
  }
}
